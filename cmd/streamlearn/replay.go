package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
	"github.com/streamlearn/streamlearn/internal/service"
)

// runReplay is the replay command: it learns the records of files (or of
// standard input) with the service that run uses, then prints the report
// and returns the error its gates (--min-accuracy, --fail-on-violation)
// and an empty input make.
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseReplayFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, warm, err := replayConfig(ctx, f)
	if err != nil {
		return err
	}
	opt := replayOptions(f, cfg, warm, stderr)
	dead, err := openDeadLetters(ctx, *f.deadPath, stderr)
	if err != nil {
		return err
	}
	if dead != nil {
		defer dead.Close()
		opt.DeadLetters = dead
	}
	svc, err := service.New(opt)
	if err != nil {
		return err
	}
	defer limitMemory(cfg, svc.Snapshot, os.Getenv, opt.Logger)()
	if isTerminal(stderr) {
		stop := showProgress(svc, opt.Source, stderr)
		defer stop()
	}
	runErr := errors.Join(svc.Run(ctx), opt.Source.Close())
	if runErr == nil {
		runErr = ctx.Err()
	}
	if runErr != nil {
		return fmt.Errorf("replay: %w", runErr)
	}
	return reportReplay(stdout, stderr, f, cfg, svc, dead)
}

// replayFlags is replay's command line, parsed and checked by
// parseReplayFlags. Each field points at a flag's value (deadPath gets
// the config's default in replayConfig, and is emptied there by off or
// /dev/null); g holds the gates, whose learners replayConfig fills in;
// fs is kept for later usage errors.
type replayFlags struct {
	fs                                   *flag.FlagSet
	cfgPath, format, reportFmt, plotPath *string
	deadPath, junitPath, warmStart, save *string
	allowEmpty, envelope                 *bool
	partition                            *int
	g                                    gate
	// deadNote, set by replayConfig, follows the count of records
	// rejected on stderr: where their dead letters went.
	deadNote string
}

// parseReplayFlags parses replay's args and checks the values that need
// no config. Its errors are usage errors already printed to stderr (or
// flag.ErrHelp).
func parseReplayFlags(args []string, stderr io.Writer) (*replayFlags, error) {
	fs := newFlagSet("replay", replayArgs, stderr)
	f := &replayFlags{fs: fs, g: gate{min: minAccuracy{}}}
	f.cfgPath = fs.String("c", "", "config `file` (default: a built-in Perceptron and plain AdaGrad)")
	f.format = fs.String("format", "", "input `format`: jsonl, libsvm, csv or tsv (default: the config's input.format, else inferred per file)")
	f.reportFmt = fs.String("report", "text", "report `format`: text or json")
	f.plotPath = fs.String("plot", "", "draw cumulative mistakes and regret against their bounds to `file` (.svg or .png)")
	f.allowEmpty = fs.Bool("allow-empty", false, "exit 0 when the input holds no record, or records of which none was learned (else exit 1, and 3)")
	f.deadPath = fs.String("dead-letters", "", "append bad records to this JSONL `file`; off (or /dev/null) discards them (default: the config's sinks.dead_letters when it is a file)")
	fs.Var(f.g.min, "min-accuracy", "fail (exit 1) when learner `NAME=ACCURACY` ends below that accuracy (0 to 1); repeatable, or comma-separated, e.g. pct=0.95,ada=0.97")
	fs.BoolVar(&f.g.failOnViolation, "fail-on-violation", false, "fail (exit 1) when a learner's published bound was broken")
	f.junitPath = fs.String("junit", "", "write the learners as test cases, and the gates they failed, to a JUnit XML `file`")
	f.envelope = fs.Bool("envelope", false, "the files are recordings of `record --envelope`: each partition is learned by a model of its own, as live, and reported")
	f.partition = fs.Int("partition", -1, "with --envelope, replay only partition `N`")
	f.warmStart = fs.String("warm-start", "", "start the model from the model `file` written by export or replay --save, of this configuration (default: the config's models.warm_start); without -c, with the configuration the file carries")
	f.save = fs.String("save", "", "write the model as it ends to the model `file` (for run --warm-start, or another replay's)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if *f.envelope && *f.plotPath != "" {
		return nil, usageErr(fs, "--plot draws one model's curves; it does not take --envelope")
	}
	if *f.partition < -1 {
		return nil, usageErr(fs, "--partition %d: a partition is 0 or more", *f.partition)
	}
	if *f.partition >= 0 && !*f.envelope {
		return nil, usageErr(fs, "--partition %d: the partition of a record is known from a recording of record --envelope (add --envelope)", *f.partition)
	}
	if *f.reportFmt != "text" && *f.reportFmt != "json" {
		return nil, usageErr(fs, "--report %q: want text or json", *f.reportFmt)
	}
	if *f.format != "" {
		switch *f.format {
		case "jsonl", "libsvm", "csv", "tsv":
		default:
			return nil, usageErr(fs, "--format %q: want jsonl, libsvm, csv or tsv", *f.format)
		}
	}
	if fs.NArg() == 0 {
		return nil, usageErr(fs, "no input files (use - for standard input)")
	}
	return f, nil
}

// replayConfig returns the configuration a replay learns with (-c's
// file, else the default, with --format applied) and the warm start of
// its models (nil without). It checks the flags against it: those about
// one model refused with models per key, --save and the outputs that
// would overwrite an input.
func replayConfig(ctx context.Context, f *replayFlags) (*config.Config, *service.WarmStart, error) {
	cfg := config.Default()
	var warm *service.WarmStart
	if *f.cfgPath != "" {
		var err error
		if cfg, err = loadConfig(ctx, *f.cfgPath); err != nil {
			return nil, nil, err
		}
	} else if *f.warmStart != "" {
		// Without -c, the configuration the model file carries, when it
		// carries one.
		var err error
		if warm, err = service.LoadWarmStart(*f.warmStart); err != nil {
			return nil, nil, err
		}
		own, err := warm.Config()
		if err != nil {
			return nil, nil, err
		}
		if own != nil {
			cfg = own
		}
	}
	if *f.format != "" {
		cfg.Input.Format = *f.format
	}
	for _, l := range cfg.Learners {
		f.g.learners = append(f.g.learners, l.Name)
	}
	if cfg.Models.By == "key" {
		// A report per key's model: the gates, plot and JUnit file of one
		// model do not apply, and a model file holds one model.
		for _, fl := range []struct {
			name string
			set  bool
		}{{"--plot", *f.plotPath != ""}, {"--junit", *f.junitPath != ""}, {"--save", *f.save != ""},
			{"--min-accuracy", len(f.g.min) > 0}, {"--fail-on-violation", f.g.failOnViolation}} {
			if fl.set {
				return nil, nil, usageErr(f.fs, "%s is about one model; with models.by: key the replay reports a model per key", fl.name)
			}
		}
	}
	var err error
	if warm == nil {
		warm, err = loadWarmStart(cmp.Or(*f.warmStart, cfg.Models.WarmStart), cfg)
	} else if err = checkWarmStart(warm, cfg); err != nil && len(warm.Model.Config) == 0 {
		err = fmt.Errorf("%w (without -c, the built-in configuration: the model file carries none, being of format version %d or a checkpoint exported without -c; give -c, the configuration that wrote it)", err, warm.Model.Format)
	}
	if err != nil {
		return nil, nil, err
	}
	if *f.save != "" {
		if err := notOverwritten(*f.save, f.fs.Args()); err != nil {
			return nil, nil, fmt.Errorf("replay: --save: %w", err)
		}
	}
	switch d := *f.deadPath; {
	case d == "off" || d == os.DevNull:
		*f.deadPath, f.deadNote = "", " (dead letters discarded: --dead-letters "+d+")"
	case d != "":
		f.deadNote = " (dead letters: " + d + ")"
	case cfg.Sinks.DiscardDeadLetters:
		f.deadNote = " (dead letters discarded: the config's sinks.dead_letters: off)"
	case cfg.Sinks.DeadLetters != nil && cfg.Sinks.DeadLetters.Kind == "file":
		*f.deadPath = cfg.Sinks.DeadLetters.Path
		f.deadNote = " (dead letters: " + *f.deadPath + ", the config's sinks.dead_letters; --dead-letters off discards them)"
	}
	for _, out := range []struct{ flag, path string }{{"--dead-letters", *f.deadPath}, {"--plot", *f.plotPath}, {"--junit", *f.junitPath}} {
		if out.path == "" || out.path == "-" {
			continue
		}
		for _, in := range f.fs.Args() {
			if in != "-" && connectors.SameFile(out.path, in) {
				return nil, nil, fmt.Errorf("replay: %s %s is the input %s: it would be written while it is read; write it elsewhere", out.flag, out.path, in)
			}
		}
	}
	return cfg, warm, nil
}

// replayOptions are the options of the service a replay runs: the
// service itself, on a source of the files, with the same decoding,
// workers, tracker and dead letters as `run`. The caller sets the dead
// letters and closes the source.
func replayOptions(f *replayFlags, cfg *config.Config, warm *service.WarmStart, stderr io.Writer) service.Options {
	opt := service.Options{Config: cfg, Source: filesource.NewFiles(f.fs.Args(), pipeline.EventConfig(cfg), os.Stdin),
		HistoryPoints: -1, WarmStart: warm,
		// Warnings, such as labels that came after their events expired.
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if *f.envelope {
		opt.Source = filesource.NewEnvelopes(f.fs.Args(), os.Stdin, int32(*f.partition), cfg.Input.MaxBytes)
	}
	if *f.plotPath != "" {
		// The sampling of the live service's curves: the plot draws the
		// points the dashboard's /v1/history serves for the same stream
		// (internal/api TestHistory pins those to a replay's).
		opt.HistoryPoints = service.DefaultHistoryPoints
	}
	return opt
}

// openDeadLetters opens and checks the dead letters file at path, or
// returns nil for an empty path. The caller closes it; on error it is
// closed already.
//
// The file is opened before the first record, as run does: locked (a
// process appending to it, as a run does from its start, is refused now
// rather than at the first dead letter, as is a folder that does not
// exist) and rid of a torn tail. One that the replay made is removed at
// its end if no dead letter came: a replay without bad records leaves no
// file behind.
func openDeadLetters(ctx context.Context, path string, stderr io.Writer) (*connectors.FileSink, error) {
	if path == "" {
		return nil, nil
	}
	dead := connectors.NewFileSink(path)
	dead.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dead.RemoveUnused = true
	if err := dead.Check(ctx); err != nil {
		dead.Close()
		if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() {
			return nil, fmt.Errorf("replay: --dead-letters: %w (--dead-letters off discards bad records)", err)
		}
		return nil, fmt.Errorf("replay: --dead-letters: %w", err)
	}
	return dead, nil
}

// reportReplay writes the reports of a replay that ended without error,
// after saving its model (--save): a report per key's model, per
// partition of a recording (--envelope), else writeReplayReport's. It
// returns the error the exit status comes from.
func reportReplay(stdout, stderr io.Writer, f *replayFlags, cfg *config.Config, svc *service.Service, dead *connectors.FileSink) error {
	var reps []service.Report
	if cfg.Models.By != "key" { // models per key are reported one at a time (writeReports)
		var err error
		if reps, err = svc.Reports(); err != nil {
			return err
		}
	}
	ins, err := svc.Intakes()
	if err != nil {
		return err
	}
	if err := checkIntake("replay", ins, cfg.Models.By == "key", *f.allowEmpty, f.deadNote, stderr); err != nil {
		return err
	}
	learnSeconds := svc.LearnSeconds()
	if *f.save != "" {
		if err := saveModel(stderr, svc, cfg, *f.save, f.fs.Args()); err != nil {
			return err
		}
	}
	if cfg.Models.By == "key" {
		snap := svc.Snapshot().Reports
		keys := slices.ContainsFunc(snap, func(r service.Report) bool { return r.Keys != nil && r.Keys.Keys > 0 })
		if !keys && !*f.allowEmpty {
			return fmt.Errorf("replay: no record in %s (--allow-empty accepts an empty input)", strings.Join(f.fs.Args(), ", "))
		}
		return writeReports(stdout, *f.reportFmt, reportsOf(svc), snap, ins, learnSeconds)
	}
	if *f.envelope {
		return writeEnvelopeReports(stdout, *f.reportFmt, *f.junitPath, f.g, reps, ins, learnSeconds, *f.allowEmpty)
	}
	return writeReplayReport(stdout, f, svc, reps, ins, learnSeconds, dead)
}

// writeReplayReport writes the report of the one model of a replay (an
// empty one when the input held no record), after closing the dead
// letters and writing the plot and the JUnit file, and returns the error
// of an empty input (but with --allow-empty) or of the gates.
func writeReplayReport(stdout io.Writer, f *replayFlags, svc *service.Service, reps []service.Report, ins []service.Intake, learnSeconds float64, dead *connectors.FileSink) error {
	rep := pipeline.Report{InvalidByReason: map[string]uint64{}, Learners: []regret.LearnerReport{}}
	var curves [][]regret.Point
	if len(reps) == 1 {
		rep = reps[0].Report
		if c := svc.Snapshot().Curves; len(c) == 1 {
			curves = c[0]
		}
	}
	rep.Seconds = learnSeconds
	if rep.Events == 0 && !*f.allowEmpty {
		return fmt.Errorf("replay: no record in %s (--allow-empty accepts an empty input)", strings.Join(f.fs.Args(), ", "))
	}
	if dead != nil {
		if err := dead.Close(); err != nil {
			return err
		}
	}
	if *f.plotPath != "" {
		names, algorithms := make([]string, len(rep.Learners)), make([]string, len(rep.Learners))
		for i, l := range rep.Learners {
			names[i], algorithms[i] = l.Name, l.Algorithm
		}
		title := fmt.Sprintf("%s: %d events, %d labeled", strings.Join(f.fs.Args(), ", "), rep.Events, rep.Labeled)
		if err := writePlot(*f.plotPath, title, names, algorithms, curves); err != nil {
			return err
		}
	}
	fails, err := f.g.failures(rep)
	if err != nil {
		return err
	}
	if *f.junitPath != "" {
		if err := writeJUnit(*f.junitPath, strings.Join(f.fs.Args(), " "), rep, fails); err != nil {
			return err
		}
	}
	if *f.reportFmt == "json" {
		// One object a line, as run and models per key print theirs.
		err = json.NewEncoder(stdout).Encode(rep)
	} else {
		err = writeTextReport(stdout, rep, paceOf(rep, ins, learnSeconds))
	}
	return errors.Join(err, f.g.check(rep, fails))
}

// showProgress writes the events learned so far to a terminal every
// second, from the service's snapshots, with how much of the input is
// read and when it will be when the files' sizes are known, until stop
// is called.
func showProgress(svc *service.Service, src connectors.Source, w io.Writer) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	progress, _ := src.(connectors.Progresser)
	go func() {
		defer close(finished)
		start := time.Now()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				var n uint64
				for _, r := range svc.Snapshot().Reports {
					n += r.Events
				}
				read, total := int64(0), int64(-1)
				if progress != nil {
					read, total = progress.Progress()
				}
				fmt.Fprintf(w, "\r\033[K%s", progressLine(n, time.Since(start), read, total))
			}
		}
	}()
	return func() { close(done); <-finished }
}

// progressLine says how far a replay is: the records, their rate, and
// with the input's size known the share read and the time left at the
// rate so far.
func progressLine(records uint64, elapsed time.Duration, read, total int64) string {
	s := fmt.Sprintf("%d records, %.0f/s", records, float64(records)/max(elapsed.Seconds(), 1e-9))
	if total > 0 && read > 0 {
		frac := min(1, float64(read)/float64(total))
		left := time.Duration(float64(elapsed) * (1 - frac) / frac).Round(time.Second)
		s += fmt.Sprintf(", %.0f%%, %v left", 100*frac, left)
	}
	return s
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// pace is the rate line's: the records a model was handed in this
// process and the seconds spent learning them (service.LearnSeconds).
type pace struct {
	records uint64
	seconds float64
}

// paceOf is the pace of r, the report of the model of intake's partition
// among ins (of a report per key: its events less a model file's), over
// the seconds spent learning.
func paceOf(r pipeline.Report, ins []service.Intake, seconds float64) pace {
	p := pace{records: r.Events, seconds: seconds}
	if r.WarmStart != nil {
		p.records -= min(r.WarmStart.Events, p.records)
	}
	if len(ins) == 1 {
		p.records = ins[0].Records
	}
	return p
}

// writeTextReport writes r as text; the first line's rate is p's: the
// records learned in this process over the seconds spent learning them.
func writeTextReport(w io.Writer, r pipeline.Report, p pace) error { return writeReportText(w, r, &p) }

// writeReportText is writeTextReport, without the seconds and the rate
// when p is nil: the report of a model that may have learned in several
// processes (a checkpoint's), whose seconds are the last one's.
func writeReportText(w io.Writer, r pipeline.Report, p *pace) error {
	if p != nil {
		rate := 0.0
		if p.seconds > 0 {
			rate = float64(p.records) / p.seconds
		}
		fmt.Fprintf(w, "events %d  labeled %d  predicted %d  invalid %d  in %.3fs (%.0f events/s)\n",
			r.Events, r.Labeled, r.Predicted, r.Invalid, p.seconds, rate)
	} else {
		// A line of each key's report: appended, not formatted.
		line := make([]byte, 0, 96)
		line = strconv.AppendUint(append(line, "events "...), r.Events, 10)
		line = strconv.AppendUint(append(line, "  labeled "...), r.Labeled, 10)
		line = strconv.AppendUint(append(line, "  predicted "...), r.Predicted, 10)
		line = strconv.AppendUint(append(line, "  invalid "...), r.Invalid, 10)
		w.Write(append(line, '\n'))
	}
	if len(r.InvalidByReason) > 0 {
		var parts []string
		for reason, n := range r.InvalidByReason {
			parts = append(parts, fmt.Sprintf("%s %d", reason, n))
		}
		slices.Sort(parts)
		fmt.Fprintf(w, "invalid by reason: %s\n", strings.Join(parts, ", "))
	}
	if l := r.Labels; l != nil {
		// Labels later: what became of the labels and the events waiting.
		fmt.Fprintf(w, "labels: joined %d  pending %d  expired %d", l.Joined, l.Pending, l.Expired)
		if l.ExpiredLearned > 0 {
			fmt.Fprintf(w, " (%d learned with the default label)", l.ExpiredLearned)
		}
		fmt.Fprintf(w, "  late %d  unknown %d  duplicate %d  delay mean %.1f max %d records\n",
			l.Late, l.Unknown, l.Duplicate, l.Delay.Mean, l.Delay.Max)
		if l.Warning != "" {
			fmt.Fprintf(w, "warning: %s\n", l.Warning)
		}
	}
	fmt.Fprintln(w)
	// Scores against a default label are a column of their own, apart
	// from the real labels' rounds, mistakes and accuracy.
	defaults := slices.ContainsFunc(r.Learners, func(l regret.LearnerReport) bool { return l.DefaultLabeled != nil })
	head := reportHead[:len(reportHead)-1]
	if defaults {
		head = reportHead
	}
	rows := make([][]string, 1, 1+len(r.Learners))
	rows[0] = head
	for _, l := range r.Learners {
		// The cells as fmt's %.4g would write them (strconv's 'g' of
		// precision 4), concatenated: a report per key is made a million
		// times.
		bound, regret := "-", "-"
		if b := l.Bound; b != nil {
			verdict := b.Status.Text()
			if b.Assumes != "" {
				verdict += " (assumes " + b.Assumes + ")"
			}
			bound = string(b.Kind) + " <= " + g4(b.Value) + " " + verdict
		} else if c := l.Certificate; c != nil {
			// No bound is checked; what the learner certifies of the
			// stream instead (algorithms.md: the Perceptron's margin).
			bound = "certificate " + c.Kind + " <= " + g4(c.Value)
		}
		if g := l.Regret; g != nil {
			regret = g4(g.Value) + " vs " + g.Comparator
			if g.Bound != nil {
				regret += " (<= " + g4(*g.Bound) + ")"
			}
		}
		state := "-" // none: the totals of models per key
		if len(l.StateSHA256) >= 12 {
			state = l.StateSHA256[:12]
		}
		row := []string{l.Name, l.Algorithm, strconv.FormatUint(l.Rounds, 10), strconv.FormatUint(l.Mistakes, 10),
			accuracyText(l.Rounds, l.Accuracy), g4(l.Loss), bound, regret, strconv.FormatUint(l.BoundViolations, 10), state}
		if d := l.DefaultLabeled; d != nil {
			row = append(row, defaultLabeledText(d))
		}
		rows = append(rows, row)
	}
	if err := writeTable(w, rows); err != nil {
		return err
	}
	if len(r.Learners) > 1 && r.Answer != "" {
		// Which row is the filter's (answer).
		if _, err := io.WriteString(w, "answer: "+r.Answer+", the filter's verdict\n"); err != nil {
			return err
		}
	}
	return writeAfterText(w, r.WarmStart)
}

// reportHead is the head of a report's table of learners, with the
// column of scores against a default label last (shared: not modified).
var reportHead = []string{"learner", "algorithm", "rounds", "mistakes", "accuracy", "loss", "bound", "regret", "violations", "state", "default-labeled"}

// g4 is v as fmt's %.4g writes it.
func g4(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// writeAfterText writes, of a model started from a model file that
// counted the records after apart, the section of those records alone:
// their counts, and each learner's rounds, mistakes, accuracy and loss
// on them (a held-out score of the file's model).
func writeAfterText(w io.Writer, ws *pipeline.WarmStartReport) error {
	if ws == nil || ws.After == nil {
		return nil
	}
	a := ws.After
	sha := ws.SHA256
	if len(sha) > 12 {
		sha = sha[:12]
	}
	fmt.Fprintf(w, "\nafter the warm start (model file %s, %d events): events %d  labeled %d  predicted %d  invalid %d\n",
		sha, ws.Events, a.Events, a.Labeled, a.Predicted, a.Invalid)
	rows := [][]string{{"learner", "algorithm", "rounds", "mistakes", "accuracy", "loss"}}
	if slices.ContainsFunc(a.Learners, func(l pipeline.AfterLearner) bool { return l.DefaultLabeled != nil }) {
		rows[0] = append(rows[0], "default-labeled")
	}
	for _, l := range a.Learners {
		row := []string{l.Name, l.Algorithm, strconv.FormatUint(l.Rounds, 10), strconv.FormatUint(l.Mistakes, 10),
			accuracyText(l.Rounds, l.Accuracy), fmt.Sprintf("%.4g", l.Loss)}
		if d := l.DefaultLabeled; d != nil {
			row = append(row, defaultLabeledText(d))
		}
		rows = append(rows, row)
	}
	return writeTable(w, rows)
}

// defaultLabeledText is a learner's last cell in a table of a report with
// scores against a default label: their rounds, mistakes and accuracy.
func defaultLabeledText(d *regret.DefaultLabeledReport) string {
	return fmt.Sprintf("%d rounds, %d mistakes, %s", d.Rounds, d.Mistakes, accuracyText(d.Rounds, d.Accuracy))
}

// accuracyText is the accuracy a over rounds as the text report prints
// it: "-" when there was no round to score (a NaN, or, from a report
// decoded from JSON, the 0 of a null).
func accuracyText(rounds uint64, a float64) string {
	if rounds == 0 || math.IsNaN(a) {
		return "-"
	}
	return strconv.FormatFloat(a, 'f', 4, 64) // fmt's %.4f
}

// writeEnvelopeReports prints the report of every partition of a replayed
// recording, as run prints its models' (text with a header per partition,
// or a JSON object a line), then checks the gates of each.
func writeEnvelopeReports(w io.Writer, format, junitPath string, g gate, reps []service.Report, ins []service.Intake, seconds float64, allowEmpty bool) error {
	if len(reps) == 0 && !allowEmpty {
		return errors.New("replay: no record of the partition asked for (--allow-empty accepts an empty input)")
	}
	var errs []error
	enc := json.NewEncoder(w)
	for i, r := range reps {
		fails, err := g.failures(r.Report)
		if err != nil {
			return err
		}
		if junitPath != "" {
			path := junitPath
			if len(reps) > 1 {
				path = strings.TrimSuffix(junitPath, ".xml") + fmt.Sprintf("-partition-%d.xml", r.Partition)
			}
			if err := writeJUnit(path, fmt.Sprintf("%s partition %d", r.Source, r.Partition), r.Report, fails); err != nil {
				return err
			}
		}
		if format == "json" {
			errs = append(errs, enc.Encode(r))
		} else {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "%s partition %d\n", r.Source, r.Partition)
			errs = append(errs, writeTextReport(w, r.Report, paceOf(r.Report, intakeOf(ins, r.Partition), seconds)))
		}
		if err := g.check(r.Report, fails); err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", r.Partition, err))
		}
	}
	return errors.Join(errs...)
}

// loadWarmStart reads the model file at path, when not empty, and checks
// that it is of cfg's model configuration.
func loadWarmStart(path string, cfg *config.Config) (*service.WarmStart, error) {
	if path == "" {
		return nil, nil
	}
	w, err := service.LoadWarmStart(path)
	if err != nil {
		return nil, err
	}
	if err := checkWarmStart(w, cfg); err != nil {
		return nil, err
	}
	return w, nil
}

// checkWarmStart checks that w is of cfg's model configuration.
func checkWarmStart(w *service.WarmStart, cfg *config.Config) error {
	if err := w.Check(cfg); err != nil {
		return fmt.Errorf("warm start: %w", err)
	}
	return nil
}

// saveModel writes the one model svc ended with to path, as a model file
// taken from a replay of files, with the model sections of cfg, its
// configuration, and says on w what it wrote, as export does (writeModel).
func saveModel(w io.Writer, svc *service.Service, cfg *config.Config, path string, files []string) error {
	ms, err := svc.Models()
	if err != nil {
		return err
	}
	switch len(ms) {
	case 0:
		return fmt.Errorf("replay: --save %s: no model: the input holds no record", path)
	case 1:
	default:
		return fmt.Errorf("replay: --save %s: %d models, one per partition: save one with --partition N", path, len(ms))
	}
	// A replay's model depends on its inputs and configuration only: so
	// does its file, but for the report's seconds, left out.
	var rep pipeline.Report
	if err := json.Unmarshal(ms[0].Report, &rep); err != nil {
		return err
	}
	rep.Seconds = 0
	rj, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	m := checkpoint.ModelOf(ms[0])
	m.Created, m.Report = time.Unix(0, 0).UTC(), rj
	if m.Config, err = cfg.ModelYAML(); err != nil {
		return err
	}
	m.From = "replay of " + strings.Join(files, " ") // cut when long (WriteModel)
	if err := writeModel(w, path, m, &rep); err != nil {
		return fmt.Errorf("replay: --save: %w", err)
	}
	return nil
}
