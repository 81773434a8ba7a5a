// Command streamlearn runs online learners on labeled event streams and
// tracks, per learner, mistakes, regret and the bound its theorem promises.
//
// Usage:
//
//	streamlearn run      [-c config.yaml] [--until-end] [--report text|json] [--preload FILE]
//	streamlearn replay   [-c config.yaml] [--format F] [--report text|json] [--plot FILE] FILE...
//	streamlearn record   [-c config.yaml | --kind K ...] [--follow] [-o FILE]
//	streamlearn publish  [-c config.yaml | --kind K ...] FILE...
//	streamlearn generate [-n N] [--seed S] [--noise P] [--unlabeled P] [--delay D [--never P]] [-o FILE]
//	streamlearn delay    [-c config.yaml] [--by D] [-o FILE] FILE...
//	streamlearn inspect  [--report text|json] CHECKPOINT|MODEL... | --config MODEL
//	streamlearn serve    --model MODEL | -c config.yaml [--checkpoint-dir DIR]
//	streamlearn version
//
// Every subcommand takes -h. Usage errors exit with status 2, runtime
// errors with status 1, a replay or run to which records came and from
// which nothing was learned with status 3.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/streamlearn/streamlearn/internal/config"
)

// errUsage marks errors that exit with status 2; the flag package has
// already printed the usage.
var errUsage = errors.New("usage error")

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

const replayArgs = "[-c config.yaml] [--format F] [--report text|json] [--allow-empty] [--plot FILE] [--dead-letters FILE|off] [--min-accuracy NAME=ACC] [--fail-on-violation] [--junit FILE] [--envelope [--partition N]] [--warm-start MODEL] [--save MODEL] FILE..."

var commands = []command{
	{"run", runArgs, "the live service: learn from a Kafka topic or NATS subject (default: an embedded NATS JetStream server)", runRun},
	{"replay", replayArgs, "replay recorded files through the learners and print the regret report", runReplay},
	{"generate", generateArgs, "write a synthetic labeled JSONL stream (a demo and test fixture)", runGenerate},
	{"record", recordArgs, "copy a topic or subject to a JSONL file, for replays in tests", runRecord},
	{"publish", publishArgs, "write JSONL files into a topic or subject", runPublish},
	{"delay", delayArgs, "turn labeled files into a JSONL stream of messages now and their labels later, for labels.delayed", runDelay},
	{"inspect", inspectArgs, "print what checkpoint and model files hold: positions, learners, rounds, mistakes, digests; a model file's configuration", runInspect},
	{"serve", serveArgs, "answer predictions, reports and metrics from a model file or the learning service's checkpoints, without consuming", runServe},
	{"export", exportArgs, "write the model a checkpoint holds to a model file, to start other models from (run --warm-start)", runExport},
	{"check", checkArgs, "validate a config and print what a run of it would do, without connecting to anything", runCheck},
	{"version", "", "print the version", runVersion},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main runs the command line args and returns the exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args[0] = "version"
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		}
		// The command's name once: "streamlearn replay: --dead-letters: …",
		// not "streamlearn replay: replay: …".
		var es config.Errors
		if errors.As(err, &es) {
			// Every error of a configuration, one a line, each as
			// the one would be.
			for _, e := range es {
				fmt.Fprintf(stderr, "streamlearn %s: %s\n", c.name, e)
			}
		} else {
			fmt.Fprintf(stderr, "streamlearn %s: %s\n", c.name, strings.TrimPrefix(err.Error(), c.name+": "))
		}
		if errors.Is(err, errNothingLearned) {
			return exitNothingLearned
		}
		return 1
	}
	fmt.Fprintf(stderr, "streamlearn: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "streamlearn runs online learners on labeled event streams and tracks their mistakes, regret and bounds.")
	fmt.Fprintln(w, "\nUsage:")
	for _, c := range commands {
		fmt.Fprintf(w, "  streamlearn %-8s %s\n", c.name, c.args)
		fmt.Fprintf(w, "      %s\n", c.summary)
	}
	fmt.Fprintln(w, "\nRun 'streamlearn COMMAND -h' for a command's flags.")
}

// examples are shown by each command's -h, after its flags.
var examples = map[string][]string{
	"run": {
		"streamlearn run                                   # an embedded NATS JetStream server, the default learners, HTTP on :8080",
		"streamlearn run -c config.yaml                    # the config's source; Ctrl-C drains and prints the report",
		"streamlearn run -c config.yaml --until-end --report json",
		"streamlearn run -c kafka.yaml --checkpoint-dir ./state --log-level info",
		"streamlearn run -c kafka.yaml --start time:2026-11-26T08:00:00Z   # a new group begins at this morning's events",
		"streamlearn run -c kafka.yaml --checkpoint-dir ./state --reset-learner ogd2   # ogd2 added to the learners: the others keep their models",
		"streamlearn run -c kafka.yaml --checkpoint-dir ./state --warm-start model.slm  # new partitions start from a trained model",
	},
	"replay": {
		"streamlearn replay -c config.yaml testdata/demo.jsonl",
		"streamlearn replay -c config.yaml --plot curves.svg testdata/demo.jsonl",
		"streamlearn replay -c config.yaml --min-accuracy pct=0.95 --fail-on-violation --junit replay.xml recorded.jsonl",
		"streamlearn replay -c kafka.yaml --envelope --partition 2 recording.jsonl",
		"zcat a9a.gz | streamlearn replay --format libsvm -",
		"streamlearn replay -c config.yaml --save model.slm last-month.jsonl   # a model to start run from (run --warm-start)",
	},
	"generate": {
		"streamlearn generate -n 5000 --seed 1 -o demo.jsonl",
		"streamlearn generate --noise 0.05 | streamlearn replay -c config.yaml -",
		"streamlearn generate --delay 100 --never 0.01 -o delayed.jsonl   # labels sent later, as label events",
	},
	"record": {
		"streamlearn record -c kafka.yaml -o recorded.jsonl",
		"streamlearn record -c kafka.yaml --envelope -o recording.jsonl   # partition, offset and key kept",
		"streamlearn record -c kafka.yaml --split -o topic.jsonl          # topic-partition-N.jsonl per partition",
		"streamlearn record -c kafka.yaml --start offset:1000 -o tail.jsonl",
		"streamlearn record --kind jetstream --url nats://127.0.0.1:4222 --stream EVENTS --subject events --follow",
	},
	"publish": {
		"streamlearn publish testdata/demo.jsonl                          # into the embedded server of `streamlearn run`",
		"streamlearn publish -c kafka.yaml events.jsonl",
		"streamlearn publish --kind jetstream --url nats://127.0.0.1:4222 --stream ORDERS --subject orders --create-stream orders.jsonl",
	},
	"delay": {
		"streamlearn delay -c examples/sms-spam.yaml --by 100 -o sms.jsonl SMSSpamCollection   # each label 100 messages after its message",
		"streamlearn delay --by 0 recorded.jsonl | streamlearn replay -c delayed.yaml -        # the labels right after: the inline labels' report",
	},
	"inspect": {
		"streamlearn inspect -c config.yaml ./state",
		"streamlearn inspect --report json ./state/partition-0.ckpt",
		"streamlearn inspect model.slm                # a model file, and the configuration it carries",
		"streamlearn inspect --config model.slm > model.yaml",
	},
	"serve": {
		"streamlearn serve -c config.yaml --checkpoint-dir ./state --http :8081   # a replica serving what run learns",
		"streamlearn serve --model model.slm                     # a model file, with the configuration it carries",
		"streamlearn serve -c config.yaml --model model.slm      # -c of the same model, its http settings",
	},
	"export": {
		"streamlearn export -o model.slm ./state/partition-0.ckpt",
		"streamlearn export -c config.yaml -o model.slm ./state/partition-0.ckpt   # checked against the config it is for",
		"streamlearn export -c kafka.yaml -o model.slm --partition 2               # from the config's checkpoint store (a directory or a bucket)",
	},
	"check":      {"streamlearn check -c config.yaml"},
	"version":    {"streamlearn version", "streamlearn --version"},
	"completion": {"source <(streamlearn completion bash)", "source <(streamlearn completion zsh)"},
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name, args string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: streamlearn %s %s\n\nFlags:\n", name, args)
		fs.PrintDefaults()
		if ex := examples[name]; len(ex) > 0 {
			fmt.Fprintf(stderr, "\nExamples:\n")
			for _, e := range ex {
				fmt.Fprintf(stderr, "  %s\n", e)
			}
		}
	}
	return fs
}

// parse parses flags, mapping flag errors to errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	// The flag package stops at the first argument that is not a flag, so
	// `replay data.jsonl --report json` would read "--report" as a file.
	// A flag of this command after the arguments is a usage error that
	// says so, unless a file of that name exists or the arguments came
	// after "--".
	if slices.Contains(args, "--") {
		return nil
	}
	for _, arg := range fs.Args() {
		name, ok := strings.CutPrefix(arg, "-")
		if !ok || name == "" {
			continue
		}
		name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
		if fs.Lookup(name) == nil {
			continue
		}
		if _, err := os.Stat(arg); err == nil {
			continue
		}
		return usageErr(fs, "flag %s after the arguments: flags come first (streamlearn %s [flags] ARGS)", arg, fs.Name())
	}
	return nil
}

func usageErr(fs *flag.FlagSet, format string, a ...any) error {
	fmt.Fprintf(fs.Output(), "streamlearn %s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
	fs.Usage()
	return errUsage
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, "streamlearn", version(bi))
	return nil
}

// version says which code a binary was built from: the module version
// under `go install module@version`; under `go build` in a checkout, the
// version Go derives from the commit, then the commit itself, with
// "-dirty" when the tree had changes; and when the binary carries neither
// (`go run`, -buildvcs=false), that it does not know.
func version(bi *debug.BuildInfo) string {
	if bi == nil {
		return "unknown (built without module information)"
	}
	var rev, when string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	v := bi.Main.Version
	if v == "(devel)" {
		v = ""
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "-dirty"
		}
		c := "commit " + rev
		if when != "" {
			c += " of " + when
		}
		if v == "" {
			return c
		}
		return v + " (" + c + ")"
	}
	if v == "" {
		return "unknown (built without version control information: go run, or go build -buildvcs=false)"
	}
	return v
}

// output is the -o file of a command, buffered: standard output for "-",
// else a file it creates. A whole output (createWholeOutput) is written
// to a temporary file beside its path and renamed onto it by Commit, so
// that a command stopped by a bad record leaves the path as it was.
type output struct {
	*bufio.Writer
	f *os.File
	// path is a whole output's, "" for one written in place.
	path string
}

// createOutput opens the output path names, written in place (record
// writes as it copies, and --follow runs until stopped).
func createOutput(path string, stdout io.Writer) (*output, error) {
	if path == "-" {
		return &output{Writer: bufio.NewWriter(stdout)}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &output{Writer: bufio.NewWriter(f), f: f}, nil
}

// createWholeOutput opens the output path names, which only Commit puts
// at path: Close without Commit removes what was written.
func createWholeOutput(path string, stdout io.Writer) (*output, error) {
	if path == "-" {
		return createOutput(path, stdout)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &output{Writer: bufio.NewWriter(f), f: f, path: path}, nil
}

// Commit flushes the output, closes its file and, for a whole output,
// renames it onto its path, returning the first error.
func (o *output) Commit() error {
	err := o.Flush()
	if o.f == nil {
		return err
	}
	f := o.f
	o.f = nil
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if o.path != "" {
		if err == nil {
			err = os.Rename(f.Name(), o.path)
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}
	return err
}

// Close closes the output: flushed and closed in place, or, for a whole
// output not committed, removed. Calling it again (deferred, after a
// Commit or Close that the command returns) does nothing more.
func (o *output) Close() error {
	if o.path != "" && o.f != nil {
		o.f.Close()
		os.Remove(o.f.Name())
		o.f = nil
		return nil
	}
	return o.Commit()
}
