package main

import (
	"bufio"
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
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/streamlearn/streamlearn/internal/api"
	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/metrics"
	"github.com/streamlearn/streamlearn/internal/service"
)

const runArgs = "[-c config.yaml] [--until-end] [--allow-empty] [--report text|json] [--http ADDR] [--preload FILE] [--nats-port N] [--store DIR] [--start POS] [--checkpoint-dir DIR] [--rebuild|--reset|--accept] [--reset-learner NAME]... [--warm-start MODEL] [--http-token-file FILE] [--log-level LEVEL]"

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", runArgs, stderr)
	cfgPath := fs.String("c", "", "config `file` (default: an embedded NATS JetStream server on 127.0.0.1:4222, stream EVENTS, subject events)")
	untilEnd := fs.Bool("until-end", false, "stop once the source is consumed up to the end it had at start, then print the final report (a Kafka member waits for its group to settle first)")
	allowEmpty := fs.Bool("allow-empty", false, "exit 0 with an empty report (no model learned or restored), and when every record that came was rejected (else exit 1, and 3), and let a Kafka member that its group gives no partition end without error")
	reportFmt := fs.String("report", "text", "final report `format`: text or json (one object per model, a line each)")
	httpAddr := fs.String("http", "", "serve the dashboard (/), /metrics, /healthz, /readyz and /v1/report on `addr` (default: the config's http.addr; off disables)")
	preload := fs.String("preload", "", "publish the JSONL `file` into the source's topic or subject before consuming")
	port := fs.Int("nats-port", 4222, "client `port` of the embedded server on 127.0.0.1 (without -c, or with source.kind embedded; -1 picks a free one)")
	store := fs.String("store", "", "JetStream storage `dir` of the embedded server (without -c, or with source.kind embedded; default: source.store_dir, else a temporary directory removed at exit)")
	tokenFile := fs.String("http-token-file", "", "require \"Authorization: Bearer <token>\" on the HTTP API (but /healthz, /readyz and the dashboard's files), the token in `file` (default: $"+tokenEnv+", else the config's http.token_file)")
	ckptDir := fs.String("checkpoint-dir", "", "keep the models' checkpoints in `dir` and resume from them (default: the config's checkpoint.dir; none: no checkpoints)")
	reset := fs.Bool("reset", false, "start afresh, from the broker's committed position, the model of a partition whose checkpoint does not hold what the broker says was committed (none, behind the commit, of another partition or stream), moving the checkpoint aside and logging what is dropped; without --rebuild, --reset or --accept such a partition stops run with an error")
	rebuild := fs.Bool("rebuild", false, "rebuild the model of such a partition by learning its records again from the broker's log (Kafka, JetStream) up to the committed position, without publishing their outputs again: the model an uninterrupted run has there; stops with an error when the broker no longer holds those records")
	logLevel := fs.String("log-level", "warn", "log `level`: debug (also the Kafka group's joins and assignments), info (also models restored, partitions assigned and revoked), warn or error")
	start := fs.String("start", "", "where a first start begins, `POS`: earliest, latest, offset:N or time:RFC3339, for a Kafka partition its group committed nothing for, a JetStream durable not yet created (default: the config's source.start, else earliest); a consumer with a position resumes from it")
	warmStart := fs.String("warm-start", "", "start every new model (a partition without a checkpoint) from the model `file` written by export or replay --save, of this configuration (default: the config's models.warm_start)")
	accept := fs.Bool("accept", false, "restore such a checkpoint as it is (a group's offsets moved forward on purpose, a stream restored from a backup), logging what the model lacks or skips")
	var resetLearners []string
	fs.Func("reset-learner", "start learner `NAME` afresh when the checkpoints were written by another list of learners: name each learner added, dropped or whose settings changed (repeat the flag), and every other learner keeps its model, counts and bound; the checkpoints are then written for the new configuration at once, so the flag does nothing on later restarts", func(name string) error {
		if name == "" {
			return errors.New("empty learner name")
		}
		resetLearners = append(resetLearners, name)
		return nil
	})
	if err := parse(fs, args); err != nil {
		return err
	}
	if *reportFmt != "text" && *reportFmt != "json" {
		return usageErr(fs, "--report %q: want text or json", *reportFmt)
	}
	if fs.NArg() > 0 {
		return usageErr(fs, "unexpected arguments %q", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageErr(fs, "--log-level %q: want debug, info, warn or error", *logLevel)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var cfg *config.Config
	if *cfgPath != "" {
		var err error
		if cfg, err = loadConfig(ctx, *cfgPath); err != nil {
			return err
		}
	} else {
		cfg = config.Default() // its source: the embedded server
		cfg.HTTP.Addr = "127.0.0.1:8080"
	}
	if *start != "" {
		if err := config.ValidStart(cfg.Source.Kind, *start); err != nil {
			return usageErr(fs, "--start %s", err)
		}
		cfg.Source.Start = *start
	}
	warmPath := cmp.Or(*warmStart, cfg.Models.WarmStart)
	if cfg.Source.Kind == "embedded" {
		// --nats-port and --store apply to the embedded server of any
		// config; without -c, theirs are the defaults.
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "nats-port":
				cfg.Source.Port = *port
			case "store":
				cfg.Source.StoreDir = *store
			}
		})
		if *cfgPath == "" && cfg.Source.Port == 0 {
			cfg.Source.Port = *port
		}
		emb, js, err := startEmbedded(cfg.Source)
		if err != nil {
			if strings.Contains(err.Error(), "address already in use") {
				err = fmt.Errorf("%w (another run may be using its port: --nats-port -1 picks a free one)", err)
			}
			return err
		}
		defer emb.Shutdown()
		cfg.Source = js
		fmt.Fprintf(stderr, "streamlearn: embedded NATS JetStream at %s: events published to subject %q are learned (stream %s, durable %s)\n",
			emb.ClientURL(), cfg.Source.Subject, cfg.Source.Stream, cfg.Source.Durable)
	}
	// The sinks first, each checked (a Kafka topic asked for, or made with
	// create: true; a JetStream stream looked up; a file opened, locked
	// and rid of a torn tail): outputs with nowhere to
	// go stop the run before anything is preloaded or the source opened,
	// so nothing is consumed and no durable or group position is made.
	var sinks []connectors.Sink
	var outs [3]connectors.Sink
	closeSinks := func() (err error) {
		for _, s := range sinks {
			err = errors.Join(err, s.Close())
		}
		sinks = nil
		return err
	}
	defer closeSinks() // on the errors before the run; after it, closed below
	for i, s := range []struct {
		key string
		cfg *config.Sink
	}{{"predictions", cfg.Sinks.Predictions}, {"reports", cfg.Sinks.Reports}, {"dead_letters", cfg.Sinks.DeadLetters}} {
		if s.cfg != nil && s.cfg.Kind == "file" && cfg.Source.Kind == "file" && connectors.SameFile(s.cfg.Path, cfg.Source.Path) {
			// Refused before the sink's check, which would cut a torn
			// tail off the source.
			return fmt.Errorf("sinks.%s: file sink %s is the source's file %s: its lines would be read back as records, forever; give the sink another path", s.key, s.cfg.Path, cfg.Source.Path)
		}
		sink, err := openSink(s.cfg, cfg.Source)
		if err != nil {
			return fmt.Errorf("sinks.%s: %w", s.key, err)
		}
		if sink == nil {
			continue
		}
		sinks = append(sinks, sink)
		if f, ok := sink.(*connectors.FileSink); ok {
			f.Logger = logger // a torn tail removed at open
		}
		if c, ok := sink.(interface{ Check(context.Context) error }); ok {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := c.Check(cctx)
			cancel()
			if err != nil {
				return fmt.Errorf("sinks.%s: %w", s.key, err)
			}
		}
		outs[i] = sink
	}
	if *preload != "" {
		n, err := publishFile(ctx, *preload, cfg.Source, "")
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "streamlearn: preloaded %d records from %s\n", n, *preload)
	}

	if n := btoi(*reset) + btoi(*accept) + btoi(*rebuild); n > 1 {
		return usageErr(fs, "--rebuild, --reset and --accept: choose one")
	}
	ckpts, closeStore, err := openCheckpoints(ctx, cmp.Or(*ckptDir, cfg.Checkpoint.Dir), cfg)
	if err != nil {
		return err
	}
	defer closeStore()
	warm, err := loadWarmStart(warmPath, cfg)
	if err != nil {
		if ckpts == nil {
			return err // every model is new
		}
		// Only a partition without a checkpoint needs the file: the
		// others restore theirs (a learner list changed with
		// --reset-learner, a file moved away since).
		logger.Warn("the warm start cannot start models: a partition without a checkpoint will stop the run", "model", warmPath, "err", err)
		warm = &service.WarmStart{Path: warmPath, Err: err}
	}
	var owned []int32
	if ckpts != nil && cfg.Source.Kind != "kafka" {
		// One partition, no consumer group: own it before the source
		// opens, since opening a JetStream durable resets it and the
		// first fetch pulls messages another process's model may be
		// waiting for.
		release, err := service.Own(ctx, ckpts, 0, cfg.Checkpoint.OwnWait, "partition 0 of the "+cfg.Source.Kind+" source", nil)
		if err != nil {
			return err
		}
		defer release()
		owned = []int32{0}
	}
	var onMismatch service.Mismatch
	switch {
	case *reset:
		onMismatch = service.MismatchReset
	case *accept:
		onMismatch = service.MismatchAccept
	case *rebuild:
		onMismatch = service.MismatchRebuild
	default:
		m, err := service.ParseMismatch(cfg.Checkpoint.OnMismatch)
		if err != nil {
			return fmt.Errorf("checkpoint.%w", err)
		}
		onMismatch = m
	}
	if name := sourceName(cfg.Source); ckpts != nil && onMismatch == service.MismatchFail && name != "" {
		// Another durable's checkpoint is refused before the source
		// opens, which would create this durable.
		if err := service.CheckConsumer(ctx, ckpts, name); err != nil {
			return err
		}
	}
	src, err := openSource(ctx, cfg.Source, sourceOptions{UntilEnd: *untilEnd, AllowEmpty: *allowEmpty, Logger: logger, MaxBytes: cfg.Input.MaxBytes, Format: cfg.Input.Format})
	if err != nil {
		return err
	}
	defer src.Close()
	opt := service.Options{Config: cfg, Source: src, Logger: logger, OwnWait: cfg.Checkpoint.OwnWait, Owned: owned}
	opt.ResetLearners, opt.WarmStart = resetLearners, warm
	if ckpts != nil {
		if cfg.Source.CommitEvery != 0 || cfg.Source.CommitInterval != 0 {
			return errors.New("run: --checkpoint-dir: with checkpoints a commit follows each checkpoint; source.commit_every and commit_interval do not apply: set checkpoint.every instead")
		}
		opt.Checkpoints, opt.CommitEvery = ckpts, cfg.Checkpoint.Every
	} else {
		opt.CommitEvery, opt.CommitInterval = cfg.Source.CommitEvery, cfg.Source.CommitInterval
	}
	opt.OnMismatch = onMismatch
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
	if *httpAddr != "" {
		addr = *httpAddr
	}
	var srv *http.Server
	if addr == "" || addr == "off" {
		opt.HistoryPoints = -1 // the curves are for the dashboard
	}
	svc, err := service.New(opt)
	if err != nil {
		return err
	}
	if addr != "" && addr != "off" {
		if srv, err = startHTTP(addr, *tokenFile, cfg, api.Options{Snapshot: svc.Snapshot, Predictor: svc.Predictor, WantDigests: svc.WantDigests}, stderr, logger, hist, latency); err != nil {
			return err
		}
	}
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
	reports, err := svc.Reports()
	if err != nil {
		return err
	}
	// A model started from a warm start and given nothing is not one the
	// source made: an empty source stays an error without --allow-empty.
	learned := slices.ContainsFunc(reports, func(r service.Report) bool { return r.WarmStart == nil || r.Events > r.WarmStart.Events })
	if !learned && !*allowEmpty {
		return fmt.Errorf("run: no model to report: %s delivered no event and no checkpoint holds a model of a partition this process owns (--allow-empty accepts an empty report)", src.Name())
	}
	ins, err := svc.Intakes()
	if err != nil {
		return err
	}
	dlNote := ""
	if cfg.Sinks.DeadLetters != nil {
		dlNote = " (dead letters: sinks.dead_letters)"
	}
	if err := checkIntake("run", ins, *allowEmpty, dlNote, stderr); err != nil {
		return err
	}
	return writeReports(stdout, *reportFmt, reports, ins, svc.LearnSeconds())
}

// writeReports writes one report per model, as JSON lines or as text,
// each named by its source, partition and, with models per key, key.
func writeReports(w io.Writer, format string, reports []service.Report, ins []service.Intake, seconds float64) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		for _, r := range reports {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s partition %d", r.Source, r.Partition)
		if r.Key != nil {
			fmt.Fprintf(w, " key %q", *r.Key)
		}
		fmt.Fprintln(w)
		in := intakeOf(ins, r.Partition)
		if r.Key != nil {
			in = nil // the partition's records are its keys'
		}
		if err := writeTextReport(w, r.Report, paceOf(r.Report, in, seconds)); err != nil {
			return err
		}
	}
	return nil
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
	sink, err := openSink(sinkCfg, src)
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
