package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

const delayArgs = "[-c config.yaml] [--format F] [--by D] [--id-prefix P] [-o FILE] FILE..."

// runDelay is the delay command: it turns labeled files into a stream of
// messages now and labels later, for labels.delayed.
func runDelay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("delay", delayArgs, stderr)
	cfgPath := fs.String("c", "", "config `file` whose input and features read the files (default: the built-in ones)")
	format := fs.String("format", "", "input `format`: jsonl, libsvm, csv or tsv (default: the config's input.format, else inferred per file)")
	by := fs.Int("by", 100, "write each label as a label event `D` messages after its message (0: right after it)")
	prefix := fs.String("id-prefix", "m-", "the id of a message that has none: this `prefix` and the record's number, from 1 over all the files")
	out := fs.String("o", "-", "output `file` (- for standard output)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErr(fs, "no input files (- reads standard input)")
	}
	if *by < 0 {
		return usageErr(fs, "--by %d: want a number of messages, 0 or more", *by)
	}
	cfg := config.Default()
	if *cfgPath != "" {
		var err error
		if cfg, err = loadConfig(ctx, *cfgPath); err != nil {
			return err
		}
	}
	if *format != "" {
		cfg.Input.Format = *format
	}
	if len(cfg.Input.Classes) > 0 {
		return fmt.Errorf("delay: %s has input.classes: delayed labels take two labels (labels.delayed is not for several classes)", cmp.Or(*cfgPath, "the configuration"))
	}
	for _, in := range fs.Args() {
		if in == "-" {
			continue
		}
		// An input that cannot be read stops delay before -o is
		// created, which would empty a file there.
		if _, err := os.Stat(in); err != nil {
			return fmt.Errorf("delay: %w", err)
		}
		if *out != "-" && connectors.SameFile(*out, in) {
			return fmt.Errorf("delay: -o %s is the input %s: it would be written while it is read; write it elsewhere", *out, in)
		}
	}
	o, err := createWholeOutput(*out, stdout)
	if err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	defer o.Close()
	ec := pipeline.EventConfig(cfg)
	ec.LabelEvents = true // a label event of the input is named as one
	d := &delayer{w: o, by: *by, prefix: *prefix, byKey: cfg.Models.By == "key", waiting: map[string]bool{}}
	for _, path := range fs.Args() {
		if err := d.file(ctx, path, ec); err != nil {
			return fmt.Errorf("delay: %w", err)
		}
	}
	if err := d.due.writeAll(o); err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	if err := o.Commit(); err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	to := *out
	if to == "-" {
		to = "standard output"
	}
	fmt.Fprintf(stderr, "delay: %d messages and %d labels (--by %d) to %s\n", d.n, d.labels, *by, to)
	return nil
}

// delayer writes the messages of the records it reads, and their labels
// by messages later.
type delayer struct {
	w         io.Writer
	by        int
	prefix    string
	n, labels int // messages written, labels queued
	due       labelQueue
	buf       []byte
	ev        event.Event
	// waiting holds the ids (with models per key, the key and the id) of
	// the messages the service holds for their labels: true while the
	// label is still to be written (labeled, in order of their messages,
	// holds them), false for a message without a label, held until
	// labels.wait expires it. The service holds the first message of an
	// id and joins a label of that id to it.
	waiting map[string]bool
	labeled []waitingID
	byKey   bool // models.by: key: a label is joined in its key's model
}

// waitingID is a message of the delayer's waiting whose label is due
// once the message at index at is written.
type waitingID struct {
	at int
	id string
}

// file writes the messages of the records of path ("-": standard input),
// and the labels that fall due among them. A record the service would
// reject stops it: its error names the file and the line.
func (d *delayer) file(ctx context.Context, path string, ec event.Config) error {
	in, name := io.Reader(os.Stdin), "standard input"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, path
	}
	rd, err := event.NewReader(in, name, ec)
	if err != nil {
		return err
	}
	for {
		if d.n&0xfff == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		err := rd.Next(&d.ev)
		if err == io.EOF {
			return nil
		}
		if e := (*event.Error)(nil); errors.As(err, &e) {
			return fmt.Errorf("%w (a record the service would reject: correct it or leave it out)", err)
		}
		if err != nil {
			return err
		}
		if d.ev.LabelOnly {
			return fmt.Errorf("%s:%d: a label event (an id and a label, no features): the input's labels come later already", name, rd.Offset())
		}
		if err := d.message(rd.Format(), rd.Raw()); err != nil {
			return fmt.Errorf("%s:%d: %w", name, rd.Offset(), err)
		}
	}
}

// message writes the message of the record just read (d.ev, decoded from
// raw of format f) without its label, queues its label, and writes the
// labels due. A JSON record keeps its members, its id and key (an id of
// its own when it has none, its id as its key when it has none); a TSV
// record becomes its text; LIBSVM and CSV records become their features
// by slot (a decimal feature name is its slot), so the message is the
// vector the record was, bit for bit.
func (d *delayer) message(f event.Format, raw []byte) error {
	i := d.n
	d.n++
	id, key := string(d.ev.ID), string(d.ev.Key)
	if id == "" {
		id = d.prefix + strconv.Itoa(d.n)
	}
	if key == "" {
		key = id
	}
	b := append(d.buf[:0], `{"id":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, key)
	switch f {
	case event.JSONL:
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(members)) {
			if name == "id" || name == "key" || name == "label" {
				continue
			}
			b = append(b, ',')
			b = appendJSONString(b, name)
			b = append(b, ':')
			var c bytes.Buffer
			if err := json.Compact(&c, members[name]); err != nil {
				return err
			}
			b = append(b, c.Bytes()...)
		}
	case event.TSV:
		_, text, _ := bytes.Cut(raw, []byte{'\t'})
		b = append(b, `,"text":`...)
		b = appendJSONString(b, string(text))
	default:
		b = append(b, `,"features":{`...)
		for k, slot := range d.ev.X.Idx {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = strconv.AppendUint(b, uint64(slot), 10)
			b = append(b, `":`...)
			b = strconv.AppendFloat(b, d.ev.X.Val[k], 'g', -1, 64)
		}
		b = append(b, '}')
	}
	b = append(b, "}\n"...)
	d.buf = b
	if _, err := d.w.Write(b); err != nil {
		return err
	}
	wid := id
	if d.byKey {
		wid = strconv.Quote(key) + " " + id
	}
	if _, held := d.waiting[wid]; held && d.ev.Labeled {
		return fmt.Errorf("id %q again while an earlier message of that id still waits for its label (or has none): the service would hold the earlier message and join this record's label to it, learning the wrong record; give each record an id of its own", id)
	} else if !held {
		d.waiting[wid] = d.ev.Labeled
		if d.ev.Labeled {
			d.labeled = append(d.labeled, waitingID{at: i + d.by, id: wid})
		}
	}
	for len(d.labeled) > 0 && d.labeled[0].at <= i {
		delete(d.waiting, d.labeled[0].id) // its label is written below
		d.labeled = d.labeled[1:]
	}
	if d.ev.Labeled {
		label := 0
		if d.ev.Label == online.Positive {
			label = 1
		}
		d.due.add(dueLabel{at: i + d.by, seq: i, id: id, key: key, label: label})
		d.labels++
	}
	return d.due.writeDue(d.w, i)
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, other characters as they are (no HTML
// escaping), bytes that are not UTF-8 as U+FFFD (as encoding/json).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
