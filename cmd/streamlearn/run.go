package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/streamlearn/streamlearn/internal/api"
	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/metrics"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

const runArgs = "[-c config.yaml] [--until-end] [--allow-empty] [--report text|json] [--http ADDR] [--preload FILE] [--nats-port N] [--store DIR] [--start POS] [--checkpoint-dir DIR] [--rebuild|--reset|--accept] [--reset-learner NAME]... [--warm-start MODEL] [--http-token-file FILE] [--log-level LEVEL]"

// runRun is the run command: it learns from the configured source until
// it ends (--until-end) or ctx is done, then prints the final report. Each
// step below opens what the next needs; runRun closes all of it, in the
// reverse order, on every return.
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, err := runConfig(ctx, f)
	if err != nil {
		return err
	}
	stopEmbedded, err := startRunEmbedded(f, cfg, stderr)
	if err != nil {
		return err
	}
	defer stopEmbedded()
	outs, closeSinks, err := openRunSinks(ctx, cfg, f.logger)
	if err != nil {
		return err
	}
	if cfg.Sinks.DiscardDeadLetters {
		f.logger.Warn("dead letters are discarded (sinks.dead_letters: off): bad records are counted by reason in the report and metrics, and written nowhere")
	}
	defer closeSinks() // on the errors before the run; after it, closed below
	if *f.preload != "" {
		n, err := publishFile(ctx, *f.preload, cfg.Source, "")
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "streamlearn: preloaded %d records from %s\n", n, *f.preload)
	}
	resume, releaseCheckpoints, err := openRunCheckpoints(ctx, f, cfg)
	if err != nil {
		return err
	}
	defer releaseCheckpoints()
	src, err := openRunSource(ctx, cfg, resume.ckpts, resume.onMismatch, f.untilEnd, f.allowEmpty, f.logger)
	if err != nil {
		return err
	}
	defer src.Close()
	svc, srv, err := startRunService(f, cfg, src, resume, outs, stderr)
	if err != nil {
		return err
	}
	defer limitMemory(cfg, svc.Snapshot, os.Getenv, f.logger)()
	runErr := svc.Run(ctx)
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		runErr = errors.Join(runErr, srv.Shutdown(sctx))
		cancel()
	}
	runErr = errors.Join(runErr, closeSinks())
	if errors.Is(runErr, connectors.ErrNoPartitions) {
		runErr = fmt.Errorf("%w (--allow-empty accepts a member with nothing to learn)", runErr)
	}
	if runErr != nil {
		return runErr
	}
	return reportRun(stdout, stderr, *f.reportFmt, *f.allowEmpty, cfg, svc, src)
}

// runFlags is run's command line, parsed and checked by parseRunFlags.
// Each field points at a flag's value; fs is kept for the usage errors
// found later and for which flags were set.
type runFlags struct {
	fs                                           *flag.FlagSet
	cfgPath, reportFmt, httpAddr, preload, store *string
	tokenFile, ckptDir, start, warmStart         *string
	untilEnd, allowEmpty, reset, rebuild, accept *bool
	port                                         *int
	resetLearners                                []string
	logger                                       *slog.Logger // at --log-level, on stderr
}

// parseRunFlags parses run's args, checks the values that need no config
// (--report, --log-level, no arguments) and makes the logger. Its errors
// are usage errors already printed to stderr (or flag.ErrHelp).
func parseRunFlags(args []string, stderr io.Writer) (*runFlags, error) {
	fs := newFlagSet("run", runArgs, stderr)
	f := &runFlags{fs: fs}
	f.cfgPath = fs.String("c", "", "config `file` (default: an embedded NATS JetStream server on 127.0.0.1:4222, stream EVENTS, subject events)")
	f.untilEnd = fs.Bool("until-end", false, "stop once the source is consumed up to the end it had at start, then print the final report (a Kafka member waits for its group to settle first)")
	f.allowEmpty = fs.Bool("allow-empty", false, "exit 0 with an empty report (no model learned or restored), and when every record that came was rejected (else exit 1, and 3), and let a Kafka member that its group gives no partition end without error")
	f.reportFmt = fs.String("report", "text", "final report `format`: text or json (one object per model, a line each)")
	f.httpAddr = fs.String("http", "", "serve the dashboard (/), /metrics, /healthz, /readyz and /v1/report on `addr` (default: the config's http.addr; off disables)")
	f.preload = fs.String("preload", "", "publish the JSONL `file` into the source's topic or subject before consuming")
	f.port = fs.Int("nats-port", 4222, "client `port` of the embedded server on 127.0.0.1 (without -c, or with source.kind embedded; -1 picks a free one)")
	f.store = fs.String("store", "", "JetStream storage `dir` of the embedded server (without -c, or with source.kind embedded; default: source.store_dir, else a temporary directory removed at exit)")
	f.tokenFile = fs.String("http-token-file", "", "require \"Authorization: Bearer <token>\" on the HTTP API (but /healthz, /readyz and the dashboard's files), the token in `file` (default: $"+tokenEnv+", else the config's http.token_file)")
	f.ckptDir = fs.String("checkpoint-dir", "", "keep the models' checkpoints in `dir` and resume from them (default: the config's checkpoint.dir; none: no checkpoints)")
	f.reset = fs.Bool("reset", false, "start afresh, from the broker's committed position, the model of a partition whose checkpoint does not hold what the broker says was committed (none, behind the commit, of another partition or stream), moving the checkpoint aside and logging what is dropped; without --rebuild, --reset or --accept such a partition stops run with an error")
	f.rebuild = fs.Bool("rebuild", false, "rebuild the model of such a partition by learning its records again from the broker's log (Kafka, JetStream) up to the committed position, without publishing their outputs again: the model an uninterrupted run has there; stops with an error when the broker no longer holds those records")
	logLevel := fs.String("log-level", "warn", "log `level`: debug (also the Kafka group's joins and generations as kafka-go logs them), info (also the partitions a Kafka group assigns this member, each generation; each partition's model as it starts, new or restored, on its first record; and partitions revoked), warn or error")
	f.start = fs.String("start", "", "where a first start begins, `POS`: earliest, latest, offset:N or time:RFC3339, for a Kafka partition its group committed nothing for, a JetStream durable not yet created (default: the config's source.start, else earliest); a consumer with a position resumes from it")
	f.warmStart = fs.String("warm-start", "", "start every new model (a partition without a checkpoint) from the model `file` written by export or replay --save, of this configuration (default: the config's models.warm_start); without -c, with the model sections the file carries")
	f.accept = fs.Bool("accept", false, "restore such a checkpoint as it is (a group's offsets moved forward on purpose, a stream restored from a backup), logging what the model lacks or skips")
	fs.Func("reset-learner", "start learner `NAME` afresh when the checkpoints were written by another list of learners: name each learner added, dropped or whose settings changed (repeat the flag), and every other learner keeps its model, counts and bound; the checkpoints are then written for the new configuration at once, so the flag does nothing on later restarts", func(name string) error {
		if name == "" {
			return errors.New("empty learner name")
		}
		f.resetLearners = append(f.resetLearners, name)
		return nil
	})
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if *f.reportFmt != "text" && *f.reportFmt != "json" {
		return nil, usageErr(fs, "--report %q: want text or json", *f.reportFmt)
	}
	if fs.NArg() > 0 {
		return nil, usageErr(fs, "unexpected arguments %q", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, usageErr(fs, "--log-level %q: want debug, info, warn or error", *logLevel)
	}
	f.logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	return f, nil
}

// runConfig returns the configuration run learns with: -c's file, else
// the default (the embedded server, HTTP on 127.0.0.1:8080) with, from
// --warm-start's model file, the model sections it carries; --start
// applied. The embedded server's flags are applied by startRunEmbedded.
func runConfig(ctx context.Context, f *runFlags) (*config.Config, error) {
	var cfg *config.Config
	if *f.cfgPath != "" {
		var err error
		if cfg, err = loadConfig(ctx, *f.cfgPath); err != nil {
			return nil, err
		}
	} else {
		cfg = config.Default() // its source: the embedded server
		cfg.HTTP.Addr = "127.0.0.1:8080"
		if *f.warmStart != "" {
			// The model sections the model file carries, when it carries
			// them: the model it starts must be of its configuration.
			warm, err := service.LoadWarmStart(*f.warmStart)
			if err != nil {
				return nil, err
			}
			own, err := warm.Config()
			if err != nil {
				return nil, err
			}
			if own != nil {
				cfg.UseModelOf(own)
			}
		}
	}
	if *f.start != "" {
		if err := config.ValidStart(cfg.Source.Kind, *f.start); err != nil {
			return nil, usageErr(f.fs, "--start %s", err)
		}
		cfg.Source.Start = *f.start
	}
	return cfg, nil
}

// startRunEmbedded starts the embedded NATS JetStream server when cfg's
// source is one (with --nats-port and --store applied), says where on
// stderr and replaces cfg.Source by the server's JetStream source. The
// caller calls shutdown when done (a no-op without an embedded server);
// on error nothing is left running.
func startRunEmbedded(f *runFlags, cfg *config.Config, stderr io.Writer) (shutdown func(), err error) {
	if cfg.Source.Kind != "embedded" {
		return func() {}, nil
	}
	// --nats-port and --store apply to the embedded server of any
	// config; without -c, theirs are the defaults.
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "nats-port":
			cfg.Source.Port = *f.port
		case "store":
			cfg.Source.StoreDir = *f.store
		}
	})
	if *f.cfgPath == "" && cfg.Source.Port == 0 {
		cfg.Source.Port = *f.port
	}
	// A port taken is told at once (the server would wait for it in
	// vain), and again when it was taken while the server started.
	port := cmp.Or(cfg.Source.Port, 4222)
	inUse := func() bool { return port > 0 && portInUse("127.0.0.1:"+strconv.Itoa(port)) }
	errInUse := fmt.Errorf("embedded NATS server: port %d is in use: choose another with --nats-port N (source.port in the config; -1 picks a free one)", port)
	if inUse() {
		return nil, errInUse
	}
	emb, js, err := startEmbedded(cfg.Source)
	if err != nil {
		if inUse() {
			err = fmt.Errorf("%w: %w", errInUse, err)
		}
		return nil, err
	}
	cfg.Source = js
	createEmbeddedStreams(cfg)
	fmt.Fprintf(stderr, "streamlearn: embedded NATS JetStream at %s: events published to subject %q are learned (stream %s, durable %s)\n",
		emb.ClientURL(), cfg.Source.Subject, cfg.Source.Stream, cfg.Source.Durable)
	return emb.Shutdown, nil
}

// createEmbeddedStreams sets create_stream on each JetStream sink of cfg
// that publishes to the embedded server (it gives no connection settings
// of its own) and leaves create_stream unset: that server lives in this
// run, so no one could create the sink's stream once the run has failed
// for the want of it.
func createEmbeddedStreams(cfg *config.Config) {
	yes := true
	for _, s := range []*config.Sink{cfg.Sinks.Predictions, cfg.Sinks.Reports, cfg.Sinks.DeadLetters} {
		if s != nil && s.Kind == "jetstream" && s.Conn.IsZero() && s.CreateStream == nil {
			s.CreateStream = &yes
		}
	}
}

// openRunSinks opens and checks cfg's sinks, in the order of outs:
// predictions, reports, dead letters (nil when not configured). The caller
// calls closeSinks when done (it may call it twice: the second call does
// nothing); on error the sinks opened are closed already.
//
// The sinks come first, each checked (a Kafka topic asked for, or made
// with create: true; a JetStream stream looked up; a file opened, locked
// and rid of a torn tail): outputs with nowhere to go stop the run before
// anything is preloaded or the source opened, so nothing is consumed and
// no durable or group position is made.
func openRunSinks(ctx context.Context, cfg *config.Config, logger *slog.Logger) (outs [3]connectors.Sink, closeSinks func() error, err error) {
	var sinks []connectors.Sink
	closeAll := func() (err error) {
		for _, s := range sinks {
			err = errors.Join(err, s.Close())
		}
		sinks = nil
		return err
	}
	defer func() {
		if err != nil {
			closeAll() // the sinks opened before the one that failed
		}
	}()
	for i, s := range []struct {
		key string
		cfg *config.Sink
	}{{"predictions", cfg.Sinks.Predictions}, {"reports", cfg.Sinks.Reports}, {"dead_letters", cfg.Sinks.DeadLetters}} {
		if s.cfg != nil && s.cfg.Kind == "file" && cfg.Source.Kind == "file" && connectors.SameFile(s.cfg.Path, cfg.Source.Path) {
			// Refused before the sink's check, which would cut a torn
			// tail off the source.
			return outs, nil, fmt.Errorf("sinks.%s: file sink %s is the source's file %s: its lines would be read back as records, forever; give the sink another path", s.key, s.cfg.Path, cfg.Source.Path)
		}
		sink, err := openSink(s.cfg, cfg.Source, logger)
		if err != nil {
			return outs, nil, fmt.Errorf("sinks.%s: %w", s.key, err)
		}
		if sink == nil {
			continue
		}
		sinks = append(sinks, sink)
		if f, ok := sink.(*connectors.FileSink); ok {
			f.Logger = logger // a torn tail removed at open
		}
		if c, ok := sink.(connectors.Checker); ok {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := c.Check(cctx)
			cancel()
			if err != nil {
				return outs, nil, fmt.Errorf("sinks.%s: %w", s.key, err)
			}
		}
		outs[i] = sink
	}
	return outs, closeAll, nil
}

// resumed is what run's models start from: the checkpoint store (nil
// without checkpoints), the warm start of new models (nil without), the
// partitions this process owns before its source opens, and what to do
// with a checkpoint that does not hold what the broker committed.
type resumed struct {
	ckpts      checkpoint.Store
	warm       *service.WarmStart
	owned      []int32
	onMismatch service.Mismatch
}

// openRunCheckpoints opens the checkpoint store (--checkpoint-dir, else
// the config's), reads the warm start and, for a source of one partition,
// owns it. The caller calls release when done, which gives the partition
// up and closes the store; on error nothing is left held.
func openRunCheckpoints(ctx context.Context, f *runFlags, cfg *config.Config) (r resumed, release func(), err error) {
	if n := btoi(*f.reset) + btoi(*f.accept) + btoi(*f.rebuild); n > 1 {
		return r, nil, usageErr(f.fs, "--rebuild, --reset and --accept: choose one")
	}
	ckpts, closeStore, err := openCheckpoints(ctx, cmp.Or(*f.ckptDir, cfg.Checkpoint.Dir), cfg)
	if err != nil {
		return r, nil, err
	}
	undo := closeStore
	defer func() {
		if err != nil {
			undo() // what was opened or owned before the error
		}
	}()
	r.ckpts = ckpts
	warmPath := cmp.Or(*f.warmStart, cfg.Models.WarmStart)
	if r.warm, err = loadWarmStart(warmPath, cfg); err != nil {
		if ckpts == nil {
			return r, nil, err // every model is new
		}
		// Only a partition without a checkpoint needs the file: the
		// others restore theirs (a learner list changed with
		// --reset-learner, a file moved away since).
		f.logger.Warn("the warm start cannot start models: a partition without a checkpoint will stop the run", "model", warmPath, "err", err)
		r.warm, err = &service.WarmStart{Path: warmPath, Err: err}, nil
	}
	if ckpts != nil && cfg.Source.Kind != "kafka" {
		// One partition, no consumer group: own it before the source
		// opens, since opening a JetStream durable resets it and the
		// first fetch pulls messages another process's model may be
		// waiting for.
		giveUp, err := service.Own(ctx, ckpts, 0, cfg.Checkpoint.OwnWait, "partition 0 of the "+cfg.Source.Kind+" source", nil)
		if err != nil {
			return r, nil, err
		}
		undo = func() { giveUp(); closeStore() }
		r.owned = []int32{0}
	}
	if r.onMismatch, err = mismatchPolicy(f, cfg); err != nil {
		return r, nil, err
	}
	return r, undo, nil
}

// mismatchPolicy is what --reset, --accept or --rebuild asks to do with a
// checkpoint the broker disagrees with, else the config's
// checkpoint.on_mismatch.
func mismatchPolicy(f *runFlags, cfg *config.Config) (service.Mismatch, error) {
	switch {
	case *f.reset:
		return service.MismatchReset, nil
	case *f.accept:
		return service.MismatchAccept, nil
	case *f.rebuild:
		return service.MismatchRebuild, nil
	}
	m, err := service.ParseMismatch(cfg.Checkpoint.OnMismatch)
	if err != nil {
		return 0, fmt.Errorf("checkpoint.%w", err)
	}
	return m, nil
}

// openRunSource opens cfg's source, after refusing, when checkpoints
// are kept and a mismatch fails the run, a store written by another
// durable. The caller closes the source.
func openRunSource(ctx context.Context, cfg *config.Config, ckpts checkpoint.Store, onMismatch service.Mismatch, untilEnd, allowEmpty *bool, logger *slog.Logger) (connectors.Source, error) {
	if name := sourceName(cfg.Source); ckpts != nil && onMismatch == service.MismatchFail && name != "" {
		// Another durable's checkpoint is refused before the source
		// opens, which would create this durable.
		if err := service.CheckConsumer(ctx, ckpts, name); err != nil {
			return nil, err
		}
	}
	src, err := openSource(ctx, cfg.Source, sourceOptions{UntilEnd: *untilEnd, AllowEmpty: *allowEmpty, Logger: logger, MaxBytes: cfg.Input.MaxBytes, Format: cfg.Input.Format})
	if err != nil {
		return nil, err
	}
	return src, nil
}

// startRunService makes the service of a run on src, its outputs outs
// and what it resumes from, and starts the HTTP server on its snapshots
// (--http, else the config's http.addr; none for "" or "off"). The
// caller runs the service and shuts srv down when it is not nil.
func startRunService(f *runFlags, cfg *config.Config, src connectors.Source, res resumed, outs [3]connectors.Sink, stderr io.Writer) (svc *service.Service, srv *http.Server, err error) {
	opt := service.Options{Config: cfg, Source: src, Logger: f.logger, OwnWait: cfg.Checkpoint.OwnWait, Owned: res.owned}
	opt.ResetLearners, opt.WarmStart = f.resetLearners, res.warm
	if res.ckpts != nil {
		if cfg.Source.CommitEvery != 0 || cfg.Source.CommitInterval != 0 {
			return nil, nil, errors.New("run: --checkpoint-dir: with checkpoints a commit follows each checkpoint; source.commit_every and commit_interval do not apply: set checkpoint.every instead")
		}
		opt.Checkpoints, opt.CommitEvery = res.ckpts, cfg.Checkpoint.Every
	} else {
		opt.CommitEvery, opt.CommitInterval = cfg.Source.CommitEvery, cfg.Source.CommitInterval
	}
	opt.OnMismatch = res.onMismatch
	opt.Predictions, opt.Reports, opt.DeadLetters = outs[0], outs[1], outs[2]
	if r := cfg.Sinks.Reports; r != nil {
		opt.ReportEvery, opt.ReportInterval = r.Every, r.Interval
	}
	hist := metrics.NewEventDuration()
	opt.EventDuration = hist
	latency := metrics.NewPredictionLatency()
	if opt.Predictions != nil {
		opt.Latency = latency
	}
	addr := cfg.HTTP.Addr
	if *f.httpAddr != "" {
		addr = *f.httpAddr
	}
	if addr == "" || addr == "off" {
		opt.HistoryPoints = -1 // the curves are for the dashboard
	}
	if svc, err = service.New(opt); err != nil {
		return nil, nil, err
	}
	if addr != "" && addr != "off" {
		if srv, err = startHTTP(addr, *f.tokenFile, cfg, api.Options{Snapshot: svc.Snapshot, Predictor: svc.Predictor, WantDigests: svc.WantDigests}, stderr, f.logger, hist, latency); err != nil {
			return nil, nil, err
		}
	}
	return svc, srv, nil
}

// reportRun writes the final report of a run that ended without error,
// in format, and returns the error its exit status comes from: no model
// to report (but with allowEmpty) or nothing learned of the records that
// came (checkIntake).
func reportRun(stdout, stderr io.Writer, format string, allowEmpty bool, cfg *config.Config, svc *service.Service, src connectors.Source) error {
	// A model started from a warm start and given nothing is not one the
	// source made: an empty source stays an error without --allow-empty.
	// With models per key, every key's model was made by its events (or
	// restored), so a partition with a key learned.
	snap := svc.Snapshot().Reports
	learned := slices.ContainsFunc(snap, func(r service.Report) bool { return r.Keys != nil && r.Keys.Keys > 0 })
	each := reportsOf(svc)
	if cfg.Models.By != "key" {
		reports, err := svc.Reports()
		if err != nil {
			return err
		}
		learned = slices.ContainsFunc(reports, func(r service.Report) bool { return r.WarmStart == nil || r.Events > r.WarmStart.Events })
		each = eachOf(reports)
	}
	if !learned && !allowEmpty {
		return fmt.Errorf("run: no model to report: %s delivered no event and no checkpoint holds a model of a partition this process owns (--allow-empty accepts an empty report); "+
			"if an earlier run committed its end, another source.group or source.durable learns it again, and checkpoint: keeps the models across runs", src.Name())
	}
	ins, err := svc.Intakes()
	if err != nil {
		return err
	}
	dlNote := ""
	switch {
	case cfg.Sinks.DeadLetters != nil:
		dlNote = " (dead letters: sinks.dead_letters)"
	case cfg.Sinks.DiscardDeadLetters:
		dlNote = " (dead letters discarded: sinks.dead_letters: off)"
	}
	if err := checkIntake("run", ins, cfg.Models.By == "key", allowEmpty, dlNote, stderr); err != nil {
		return err
	}
	return writeReports(stdout, format, each, snap, ins, svc.LearnSeconds())
}

// reports gives writeReports its reports: it calls of with each report
// (possibly on several at once) and f with of's results in the reports'
// order, one at a time, until either returns an error
// (service.EachReportOf's form).
type reports func(of func(service.Report) (rendered, error), f func(rendered) error) error

// rendered is one report as writeReports writes it, and what the text
// between two reports depends on: its partition, and whether it is a
// key's.
type rendered struct {
	b         []byte
	partition int32
	keyed     bool
	// labels is a key's labels report, summed in order into its
	// partition's totals.
	labels *pipeline.LabelsReport
}

// reportsOf returns the reports of svc, for writeReports.
func reportsOf(svc *service.Service) reports {
	return func(of func(service.Report) (rendered, error), f func(rendered) error) error {
		return service.EachReportOf(svc, of, f)
	}
}

// writeReports writes one report per model, in each's order (with models
// per key, made and rendered a few hundred at a time on every core:
// service.EachReportOf), as JSON lines or as text, each named by its
// source, partition and, with models per key, key; with models per key,
// each partition's keys are followed by their totals, from totals (the
// partitions' reports of a snapshot), with the keys' labels summed. As
// text, each key's report says what was served (with a global model).
func writeReports(out io.Writer, format string, each reports, totals []service.Report, ins []service.Intake, seconds float64) error {
	// A report per key may be a million: buffered, not a write each line.
	w := bufio.NewWriterSize(out, 64<<10)
	var err error
	if format == "json" {
		// Each key's model, then its partition's totals, as /v1/report
		// has them, a line each.
		enc := json.NewEncoder(w)
		err = withKeyTotals(each, totals, func(r service.Report) (rendered, error) {
			b, err := json.Marshal(r) // json.Encoder's line, less its newline
			return rendered{b: append(b, '\n')}, err
		}, func(r rendered) error {
			_, err := w.Write(r.b)
			return err
		}, func(t service.Report) error { return enc.Encode(t) })
	} else {
		err = writeReportsText(w, each, totals, ins, seconds)
	}
	if err != nil {
		return err
	}
	return w.Flush()
}

// writeReportsText is writeReports' text.
func writeReportsText(w io.Writer, each reports, totals []service.Report, ins []service.Intake, seconds float64) error {
	first := true
	return withKeyTotals(each, totals, func(r service.Report) (rendered, error) {
		// Room for a key's report at once (about 270 bytes a learner),
		// its head appended: fmt's "%s partition %d key %q\n".
		var b bytes.Buffer
		b.Grow(128 + 320*len(r.Learners))
		head := append(b.AvailableBuffer(), r.Source...)
		head = strconv.AppendInt(append(head, " partition "...), int64(r.Partition), 10)
		if r.Key != nil {
			head = strconv.AppendQuote(append(head, " key "...), *r.Key)
		}
		b.Write(append(head, '\n'))
		if r.Key != nil {
			// The seconds are the whole run's, of every key: the
			// partition's totals have them.
			if err := writeReportText(&b, r.Report, nil); err != nil {
				return rendered{}, err
			}
		} else if err := writeTextReport(&b, r.Report, paceOf(r.Report, intakeOf(ins, r.Partition), seconds)); err != nil {
			return rendered{}, err
		}
		if err := writeServedText(&b, r.Mix); err != nil {
			return rendered{}, err
		}
		return rendered{b: b.Bytes()}, nil
	}, func(r rendered) error {
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		_, err := w.Write(r.b)
		return err
	}, func(t service.Report) error {
		fmt.Fprintln(w)
		return writeKeyTotalsText(w, t, paceOf(t.Report, intakeOf(ins, t.Partition), seconds))
	})
}

// eachOf returns reports, for writeReports.
func eachOf(rs []service.Report) reports {
	return func(of func(service.Report) (rendered, error), f func(rendered) error) error {
		for _, r := range rs {
			t, err := of(r)
			if err != nil {
				return err
			}
			if err := f(t); err != nil {
				return err
			}
		}
		return nil
	}
}

// publishFile publishes every non-empty line of a JSONL file to the
// source's topic or subject (or to topic when not empty), using each
// event's "key" as the Kafka key. It returns the number of records.
func publishFile(ctx context.Context, path string, src config.Source, topic string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sinkCfg := &config.Sink{Kind: src.Kind, Topic: src.Topic, Subject: src.Subject, Stream: src.Stream}
	if topic != "" {
		sinkCfg.Topic, sinkCfg.Subject = topic, topic
	}
	if src.Kind == "file" {
		return 0, errors.New("publish: the source is a file; nothing to publish to")
	}
	sink, err := openSink(sinkCfg, src, nil)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var k struct {
			Key string `json:"key"`
		}
		_ = json.Unmarshal(line, &k) // bad records are published as they are: the service dead-letters them
		if err := sink.Publish(ctx, []byte(k.Key), line); err != nil {
			sink.Close()
			return n, fmt.Errorf("publish %s line %d: %w", path, n+1, err)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		sink.Close()
		return n, fmt.Errorf("publish %s: %w", path, err)
	}
	if err := sink.Flush(ctx); err != nil {
		sink.Close()
		return n, err
	}
	return n, sink.Close()
}

// loopback reports whether addr listens on a loopback address only.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// startHTTP serves the HTTP API of opt (Snapshot and Predictor; the
// configuration, token and metrics registry are filled in here) on addr,
// the metrics of the snapshots and of extra beside the Go runtime's, and
// says where on stderr. The token is read as httpToken says.
func startHTTP(addr, tokenFile string, cfg *config.Config, opt api.Options, stderr io.Writer, logger *slog.Logger, extra ...prometheus.Collector) (*http.Server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(opt.Snapshot), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	token, err := httpToken(tokenFile, cfg.HTTP.TokenFile, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("http: %s is in use: choose another address with --http ADDR (http.addr in the config; off serves no HTTP): %w", addr, err)
	}
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	opt.Config, opt.Gatherer, opt.Token = cfg, reg, token
	srv := api.NewServer(addr, api.New(opt))
	auth := ""
	if token != "" {
		auth = " (bearer token required but for /healthz and /readyz; open the dashboard as /#token=TOKEN)"
	}
	fmt.Fprintf(stderr, "streamlearn: serving http://%s/metrics and /v1/report; the dashboard at /%s\n", ln.Addr(), auth)
	if token == "" && !loopback(ln.Addr()) {
		fmt.Fprintf(stderr, "streamlearn: warning: the HTTP API on %s has no token: whoever reaches it reads every report and asks predictions; set --http-token-file, $%s or http.token_file\n", ln.Addr(), tokenEnv)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server", "err", err)
		}
	}()
	return srv, nil
}

// openCheckpoints opens the checkpoint store of dir, when not empty, else
// of cfg's checkpoint.bucket, else returns nil; close releases it.
func openCheckpoints(ctx context.Context, dir string, cfg *config.Config) (st checkpoint.Store, close func(), err error) {
	switch {
	case dir != "":
		d, err := checkpoint.OpenDir(dir)
		if err != nil {
			return nil, nil, err
		}
		return d, func() {}, nil
	case cfg.Checkpoint.Bucket != "":
		nc := natsConn(cfg.Source.Conn)
		if u := cfg.Checkpoint.URL; u != "" {
			nc = connectors.NATSConfig{URL: u}
		}
		b, err := dialObjectStore(ctx, nc, cfg.Checkpoint.Bucket, checkpoint.ObjectStoreConfig{Lease: cfg.Checkpoint.Lease})
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint.bucket: %w", err)
		}
		return b, func() { b.Close() }, nil
	}
	return nil, func() {}, nil
}

// portInUse reports whether addr (host:port) cannot be listened on because
// something else listens there.
func portInUse(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.EADDRINUSE)
	}
	_ = ln.Close()
	return false
}
