package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", replayArgs, stderr)
	cfgPath := fs.String("c", "", "config `file` (default: a built-in perceptron and logistic OGD)")
	format := fs.String("format", "", "input `format`: jsonl, libsvm, csv or tsv (default: the config's input.format, else inferred per file)")
	reportFmt := fs.String("report", "text", "report `format`: text or json")
	plotPath := fs.String("plot", "", "draw cumulative mistakes and regret against their bounds to `file` (.svg or .png)")
	allowEmpty := fs.Bool("allow-empty", false, "exit 0 when the input holds no record")
	deadPath := fs.String("dead-letters", "", "append bad records to this JSONL `file` (default: the config's sinks.dead_letters when it is a file)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *reportFmt != "text" && *reportFmt != "json" {
		return usageErr(fs, "--report %q: want text or json", *reportFmt)
	}
	if *format != "" {
		switch *format {
		case "jsonl", "libsvm", "csv", "tsv":
		default:
			return usageErr(fs, "--format %q: want jsonl, libsvm, csv or tsv", *format)
		}
	}
	if fs.NArg() == 0 {
		return usageErr(fs, "no input files (use - for standard input)")
	}

	cfg := config.Default()
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	if *format != "" {
		cfg.Input.Format = *format
	}
	p, err := pipeline.New(cfg)
	if err != nil {
		return err
	}
	if *plotPath != "" {
		// The sampling of the live service's curves: the plot draws the
		// points the dashboard's /v1/history serves for the same stream
		// (internal/api TestHistory pins those to a replay's).
		p.Tracker().EnableHistory(service.DefaultHistoryPoints)
	}

	var (
		dl      pipeline.DeadLetters
		closeDL = func() error { return nil }
	)
	if *deadPath == "" && cfg.Sinks.DeadLetters != nil && cfg.Sinks.DeadLetters.Kind == "file" {
		*deadPath = cfg.Sinks.DeadLetters.Path
	}
	if *deadPath != "" {
		f := connectors.NewFileSink(*deadPath)
		defer f.Close()
		dl = &service.DeadLetters{Sink: f}
		closeDL = f.Close
	}

	ecfg := pipeline.EventConfig(cfg)
	start := time.Now()
	for _, name := range fs.Args() {
		if err := replayFile(ctx, p, name, ecfg, dl, stderr); err != nil {
			return err
		}
	}
	rep, err := p.Report()
	if err != nil {
		return err
	}
	rep.Seconds = time.Since(start).Seconds()
	if rep.Events == 0 && !*allowEmpty {
		return fmt.Errorf("replay: no record in %s (--allow-empty accepts an empty input)", strings.Join(fs.Args(), ", "))
	}
	if err := closeDL(); err != nil {
		return err
	}
	if *plotPath != "" {
		if err := writePlot(*plotPath, p.Names(), p.Algorithms(), p.Tracker().History()); err != nil {
			return err
		}
	}
	if *reportFmt == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeTextReport(stdout, rep)
}

func replayFile(ctx context.Context, p *pipeline.Pipeline, name string, ecfg event.Config, dl pipeline.DeadLetters, stderr io.Writer) error {
	var in io.Reader
	if name == "-" {
		in, name = os.Stdin, "stdin"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	r, err := event.NewReader(in, name, ecfg)
	if err != nil {
		return err
	}
	var progress func(uint64)
	if isTerminal(stderr) {
		start := time.Now()
		progress = func(n uint64) {
			fmt.Fprintf(stderr, "\r%s: %d records, %.0f/s ", name, n, float64(n)/time.Since(start).Seconds())
		}
		defer fmt.Fprint(stderr, "\r\033[K")
	}
	return p.Replay(ctx, r, dl, progress)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func writeTextReport(w io.Writer, r pipeline.Report) error {
	rate := 0.0
	if r.Seconds > 0 {
		rate = float64(r.Events) / r.Seconds
	}
	fmt.Fprintf(w, "events %d  labeled %d  predicted %d  invalid %d  in %.3fs (%.0f events/s)\n",
		r.Events, r.Labeled, r.Predicted, r.Invalid, r.Seconds, rate)
	if len(r.InvalidByReason) > 0 {
		var parts []string
		for reason, n := range r.InvalidByReason {
			parts = append(parts, fmt.Sprintf("%s %d", reason, n))
		}
		slices.Sort(parts)
		fmt.Fprintf(w, "invalid by reason: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "learner\talgorithm\trounds\tmistakes\taccuracy\tloss\tbound\tregret\tviolations\tstate")
	for _, l := range r.Learners {
		bound, regret := "-", "-"
		if b := l.Bound; b != nil {
			verdict := "holds"
			if !b.Holds {
				verdict = "BROKEN"
			}
			bound = fmt.Sprintf("%s <= %.4g %s", b.Kind, b.Value, verdict)
		} else if c := l.Certificate; c != nil {
			bound = fmt.Sprintf("%s <= %.4g", c.Kind, c.Value)
		}
		if g := l.Regret; g != nil {
			regret = fmt.Sprintf("%.4g vs %s", g.Value, g.Comparator)
			if g.Bound != nil {
				regret += fmt.Sprintf(" (<= %.4g)", *g.Bound)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.4f\t%.4g\t%s\t%s\t%d\t%s\n",
			l.Name, l.Algorithm, l.Rounds, l.Mistakes, l.Accuracy, l.Loss, bound, regret, l.BoundViolations, l.StateSHA256[:12])
	}
	return tw.Flush()
}
