package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
)

const (
	publishArgs = "[-c config.yaml | --kind K --brokers B --url U] [--topic T | --subject S] [--stream N --create-stream] FILE..."
	recordArgs  = "[-c config.yaml | --kind K --brokers B --url U] [--topic T | --subject S] [--follow] [--start POS] [--envelope] [-o FILE [--split]]"
)

// sourceFlags are the connection flags of publish and record; they
// override the config file's source.
type sourceFlags struct {
	cfg, kind, brokers, url, topic, subject, stream, group, durable *string
	// embedded is set by source when the stream is the one the embedded
	// server of `run` holds, which listens only while run runs.
	embedded *bool
}

// addSourceFlags defines the connection flags; a reader (record) also has
// the group and durable it reads with.
func addSourceFlags(fs *flag.FlagSet, reader bool) sourceFlags {
	f := sourceFlags{
		cfg:      fs.String("c", "", "config `file` whose source names the stream"),
		kind:     fs.String("kind", "", "transport: kafka, nats or jetstream (default: the config's source.kind)"),
		brokers:  fs.String("brokers", "", "Kafka brokers, comma-separated"),
		url:      fs.String("url", "", "NATS server URL"),
		topic:    fs.String("topic", "", "Kafka topic"),
		subject:  fs.String("subject", "", "NATS subject"),
		stream:   fs.String("stream", "", "JetStream stream"),
		group:    new(string),
		durable:  new(string),
		embedded: new(bool),
	}
	if reader {
		f.group = fs.String("group", "", "Kafka consumer `group` to read with (default streamlearn-record)")
		f.durable = fs.String("durable", "", "JetStream `durable` to read with (default streamlearn-record)")
	}
	return f
}

// source returns the source the flags and config describe. With neither,
// it is the embedded default's stream on 127.0.0.1:4222.
func (f sourceFlags) source(ctx context.Context) (config.Source, error) {
	src := config.Source{Kind: "jetstream", Conn: config.Conn{URL: "nats://127.0.0.1:4222"},
		Subject: connectors.EmbeddedSubject, Stream: connectors.EmbeddedStream}
	if *f.cfg != "" {
		c, err := loadConfig(ctx, *f.cfg)
		if err != nil {
			return src, err
		}
		src = c.Source
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&src.Kind, *f.kind)
	*f.embedded = *f.cfg == "" && *f.kind == "" || src.Kind == "embedded"
	if src.Kind == "embedded" {
		url := *f.url
		if url == "" {
			var err error
			if url, err = embeddedURL(src); err != nil {
				return src, err
			}
		}
		src = embeddedSource(src, url)
	}
	set(&src.URL, *f.url)
	set(&src.Topic, *f.topic)
	set(&src.Subject, *f.subject)
	set(&src.Stream, *f.stream)
	if *f.brokers != "" {
		src.Brokers = strings.Split(*f.brokers, ",")
	}
	return src, nil
}

// unreachable returns err, an error of reaching src, saying what to do
// when no server listens where the embedded server of `run` would: start
// run first, or give the address it printed.
func (f sourceFlags) unreachable(err error, src config.Source) error {
	if *f.embedded && errors.Is(err, nats.ErrNoServers) {
		return fmt.Errorf("%w: the embedded server listens while `streamlearn run` runs: start it first, or give --url the address it printed", err)
	}
	return err
}

func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("publish", publishArgs, stderr)
	sf := addSourceFlags(fs, false)
	create := fs.Bool("create-stream", false, "JetStream: create the stream (--stream) capturing the subject (--subject) when it does not exist; an existing one is left as it is. Without FILE it does only that")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 && !*create {
		return usageErr(fs, "no input files (--create-stream alone creates the stream)")
	}
	src, err := sf.source(ctx)
	if err != nil {
		return err
	}
	if *create {
		if src.Kind != "jetstream" {
			return usageErr(fs, "--create-stream: the transport is %q; streams are JetStream's", src.Kind)
		}
		if src.Stream == "" || src.Subject == "" {
			return usageErr(fs, "--create-stream needs --stream and --subject (or a config that names them)")
		}
		created, err := connectors.EnsureStream(ctx, natsConn(src.Conn), src.Stream, src.Subject)
		if err != nil {
			return err
		}
		switch {
		case created && fs.NArg() > 0:
			fmt.Fprintf(stdout, "created stream %s capturing %s\n", src.Stream, src.Subject)
		case created: // the stream is all this publish does: say so where notes go
			fmt.Fprintf(stderr, "created stream %s capturing %s\n", src.Stream, src.Subject)
		case fs.NArg() == 0:
			fmt.Fprintf(stderr, "stream %s exists and captures %s: left as it is\n", src.Stream, src.Subject)
		}
	}
	for _, path := range fs.Args() {
		n, err := publishFile(ctx, path, src, "")
		if err != nil {
			return sf.unreachable(err, src)
		}
		fmt.Fprintf(stdout, "published %d records from %s\n", n, path)
	}
	return nil
}

// envelope is one line of `record --envelope`: the record's position and
// its value, verbatim: as JSON when it is JSON, else as base64 in
// value_base64 (a TSV or LIBSVM line, bytes that are not UTF-8), so that
// a replay gets back the bytes the broker held.
type envelope struct {
	Partition   int32           `json:"partition"`
	Offset      int64           `json:"offset"`
	Key         string          `json:"key,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
	ValueBase64 []byte          `json:"value_base64,omitempty"`
}

// runRecord is the record command: it copies the records of a topic or
// subject, from where --start says up to the end the stream had at start
// (or on, with --follow, until ctx is done), to the -o file, one a line.
func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseRecordFlags(args, stderr)
	if err != nil {
		return err
	}
	src, err := recordSource(ctx, f)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, closeSource, err := openRecordSource(ctx, src, f.follow, logger)
	if err != nil {
		return f.sf.unreachable(err, src)
	}
	defer closeSource()
	if *f.split && *f.out == "-" {
		return usageErr(f.fs, "--split writes one file per partition: give -o FILE")
	}
	outs := &recordOutputs{name: *f.out, split: *f.split, stdout: stdout, files: map[int32]*output{}}
	defer outs.Close()
	if !*f.split {
		if _, err := outs.of(0); err != nil { // the file exists even when nothing is recorded
			return err
		}
	}
	n, err := copyRecords(ctx, s, outs, *f.env)
	if err != nil {
		return err
	}
	if err := outs.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "recorded %d records from %s\n", n, s.Name())
	return nil
}

// recordFlags is record's command line, parsed by parseRecordFlags. Each
// field points at a flag's value; fs is kept for later usage errors.
type recordFlags struct {
	fs                 *flag.FlagSet
	sf                 sourceFlags
	follow, env, split *bool
	out, start         *string
}

// parseRecordFlags parses record's args. Its errors are usage errors
// already printed to stderr (or flag.ErrHelp).
func parseRecordFlags(args []string, stderr io.Writer) (*recordFlags, error) {
	fs := newFlagSet("record", recordArgs, stderr)
	f := &recordFlags{fs: fs, sf: addSourceFlags(fs, true)}
	f.follow = fs.Bool("follow", false, "keep recording past the end the stream had at start, until interrupted")
	f.env = fs.Bool("envelope", false, `write {"partition","offset","key","value"} per line instead of the bare value`)
	f.out = fs.String("o", "-", "output `file` (- for standard output)")
	f.start = fs.String("start", "", "where recording begins, `POS`: earliest (the first record held), latest (only what is published from now on, with --follow), offset:N or time:RFC3339 (default: the config's source.start, else earliest)")
	f.split = fs.Bool("split", false, "write each partition's records to a file of its own, the -o file's name with -partition-N before its extension: each replays as that partition's model")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	return f, nil
}

// recordSource returns the source record reads: the flags' and config's
// (sourceFlags.source), with --start applied, and a group and durable of
// record's own.
func recordSource(ctx context.Context, f *recordFlags) (config.Source, error) {
	src, err := f.sf.source(ctx)
	if err != nil {
		return src, err
	}
	if *f.start != "" {
		if err := config.ValidStart(src.Kind, *f.start); err != nil {
			return src, usageErr(f.fs, "--start %s", err)
		}
		src.Start = *f.start
	}
	// record never commits, and uses a group/durable of its own, so it
	// neither disturbs the service nor remembers what it copied.
	// The durable is its own for this pass (a second record beside it has
	// another), and removed at the end; a --durable given is left.
	src.Group, src.Durable = "streamlearn-record", fmt.Sprintf("streamlearn-record-%d-%d", os.Getpid(), time.Now().UnixNano())
	if *f.sf.group != "" {
		src.Group = *f.sf.group
	}
	if *f.sf.durable != "" {
		src.Durable = *f.sf.durable
	}
	return src, nil
}

// openRecordSource opens src for record, to its end at start unless
// follow. The caller calls the func returned when done: it closes the
// source and removes a JetStream durable that the open made (logging on
// logger when that fails); on error nothing is left open or made.
func openRecordSource(ctx context.Context, src config.Source, follow *bool, logger *slog.Logger) (connectors.Source, func(), error) {
	// A JetStream durable record makes for itself is removed when done; one
	// that was there before is left.
	remove := func(context.Context) error { return nil }
	var err error
	if src.Kind == "jetstream" {
		if remove, err = connectors.RemoveIfNew(ctx, natsConn(src.Conn), src.Stream, src.Durable); err != nil {
			return nil, nil, err
		}
	}
	s, err := openSource(ctx, src, sourceOptions{UntilEnd: !*follow, Logger: logger})
	if err != nil {
		return nil, nil, errors.Join(err, remove(context.WithoutCancel(ctx)))
	}
	return s, func() {
		s.Close()
		if rerr := remove(context.WithoutCancel(ctx)); rerr != nil {
			logger.Warn("record: " + rerr.Error())
		}
	}, nil
}

// recordOutputs are record's output files, each created at its first
// use: the -o file, or with split one per partition, its name with
// -partition-N before its extension.
type recordOutputs struct {
	name   string
	split  bool
	stdout io.Writer // for the name "-"
	files  map[int32]*output
}

// of returns the output of partition p's records, creating it if need be.
func (o *recordOutputs) of(p int32) (*output, error) {
	if !o.split {
		p = 0
	}
	if out := o.files[p]; out != nil {
		return out, nil
	}
	name := o.name
	if o.split {
		ext := filepath.Ext(name)
		name = fmt.Sprintf("%s-partition-%d%s", strings.TrimSuffix(name, ext), p, ext)
	}
	out, err := createOutput(name, o.stdout)
	if err != nil {
		return nil, err
	}
	o.files[p] = out
	return out, nil
}

// Close flushes and closes the outputs, stopping at the first error: a
// second Close closes the ones left.
func (o *recordOutputs) Close() error {
	for p, out := range o.files {
		delete(o.files, p)
		if err := out.Close(); err != nil {
			return err
		}
	}
	return nil
}

// copyRecords writes the records of s to outs, one a line (an envelope
// with env, else the bare value), until the end of its input or ctx is
// done, and returns how many it wrote.
func copyRecords(ctx context.Context, s connectors.Source, outs *recordOutputs, env bool) (int, error) {
	n := 0
	for {
		rec, err := s.Fetch(ctx)
		if errors.Is(err, connectors.ErrEndOfInput) || ctx.Err() != nil {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		bw, err := outs.of(rec.Partition)
		if err != nil {
			return n, err
		}
		if env {
			e := envelope{Partition: rec.Partition, Offset: rec.Offset, Key: string(rec.Key)}
			if json.Valid(rec.Value) {
				e.Value = rec.Value
			} else {
				e.ValueBase64 = rec.Value
			}
			b, err := json.Marshal(e)
			if err != nil {
				return n, err
			}
			bw.Write(b)
		} else {
			bw.Write(rec.Value)
		}
		bw.WriteByte('\n')
		n++
	}
}
