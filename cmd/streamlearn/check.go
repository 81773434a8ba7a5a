package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/learners"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

const checkArgs = "-c config.yaml"

// runCheck validates a configuration and prints what a run of it would
// do — what it reads, its learners and the bounds it checks, the memory of
// a model, where it writes and saves — without connecting to anything.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("check", checkArgs, stderr)
	cfgPath := fs.String("c", "", "config `file` to check")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" || fs.NArg() > 0 {
		return usageErr(fs, "want -c config.yaml and nothing else")
	}
	cfg, err := loadConfig(ctx, *cfgPath)
	if err != nil {
		return err
	}
	// What a model costs: one per partition, measured by building one;
	// a key's, sparse, its footprint.
	var mem uint64
	var cost keyCost
	if cfg.Models.By == "key" {
		cost, err = keyedCost(cfg)
	} else {
		mem, err = modelMemory(cfg)
	}
	if err != nil {
		return err
	}
	if cfg.Source.Kind != "" {
		// What run refuses at start: records of a source are decoded one
		// by one, without a file's header.
		if _, err := event.NewDecoder(pipeline.EventConfig(cfg)); err != nil {
			return fmt.Errorf("%s: source.kind %s: %w", *cfgPath, cfg.Source.Kind, err)
		}
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "%s: valid\n\n", *cfgPath)
	in := cfg.Input
	format := in.Format
	if format == "" {
		format = "inferred per file (jsonl for stream records)"
	}
	if len(in.Classes) > 0 {
		fmt.Fprintf(w, "input:\t%s; records up to %d bytes; %d classes: %s\n", format, in.MaxBytes, len(in.Classes), strings.Join(in.Classes, ", "))
	} else {
		fmt.Fprintf(w, "input:\t%s; records up to %d bytes; labels +1: 1, true%s; -1: 0, false%s\n", format, in.MaxBytes, list(in.Positive), list(in.Negative))
	}
	f := cfg.Features
	fmt.Fprintf(w, "features:\t2^%d slots, scale %s, text up to %d-grams\n", f.Bits, f.Scale, f.Text.NGrams)
	if l := cfg.Labels; l.Delayed {
		fmt.Fprintf(w, "labels:\tdelayed: wait %d records, at most %d pending; the bounds below are for labels d rounds late, d the most labels learned while an event waited (the report's delay_rounds)\n", l.Wait, l.MaxPending)
	}
	if cfg.Models.By == "key" {
		fmt.Fprintf(w, "model:\t%s, %s of memory for a new key's model (its footprint)\n", learnerCount(len(cfg.Learners)), mib(uint64(cost.new)))
	} else {
		fmt.Fprintf(w, "model:\t%s, %s of memory per model (one model per partition; measured by building one)\n", learnerCount(len(cfg.Learners)), mib(mem))
	}
	for _, l := range cfg.Learners {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", l.Name, l.Algorithm, learnerBound(l, len(in.Classes), cfg.Labels.Delayed))
	}
	writeAnswer(w, cfg)
	if dir := cfg.Models.SpillDir; dir != "" && cfg.Models.By == "key" {
		// A directory, not a connection: check it as run would at start.
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("%s: models.spill_dir %s: not a directory (%v): evicted models go there; set it to a directory this process may write", *cfgPath, dir, err)
		}
	}
	if path := cfg.Models.WarmStart; path != "" {
		// A model file is read, not a connection: check that it starts
		// models of this configuration, as run would at start.
		warm, err := loadWarmStart(path, cfg)
		if err != nil {
			return fmt.Errorf("%s: models.warm_start: %w", *cfgPath, err)
		}
		fmt.Fprintf(w, "  new models start from %s (%s)\n", warm, warm.Model.From)
	}
	if cfg.Models.By == "key" {
		writeModelsPerKey(w, cfg.Models, cost)
		writeMemoryLimit(w, cfg)
	}
	writeConnections(w, cfg)
	return w.Flush()
}

// learnerBound returns the bound the tracker checks for l, a learner of
// a configuration of classes classes (0: binary), with labels delayed or
// not: the branch its parameters choose, "no bound" when it has none.
// With delayed labels it is the bound's delayed form, or, for a theorem
// that assumes immediate labels, the bound marked as the report marks it.
func learnerBound(l config.Learner, classes int, delayed bool) string {
	a, ok := learners.Lookup(l.Algorithm)
	if !ok || a.Bound == "" {
		return "no bound"
	}
	bound := a.Bound
	p := l.Params
	if p == nil {
		p = a.Params()
	}
	if a.BoundOf != nil {
		// The branch of the bound that applies to these parameters.
		if b := a.BoundOf(p); b != "" {
			bound = b
		}
	}
	ovr := classes > 0 && !a.Multiclass
	if delayed && !ovr && a.DelayedBoundOf != nil {
		if b := a.DelayedBoundOf(p); b != "" {
			return b
		}
	}
	if ovr {
		bound = fmt.Sprintf("one versus the rest, a model per class: mistakes ≤ the sum of the %d models' mistake bounds, when each has one (%s)", classes, bound)
	}
	if delayed {
		// The tracker's AssumeDelayed: no delayed form, not checked.
		bound += " — with delayed labels none: its theorem assumes immediate labels; the report marks it assumes: immediate labels, counts no crossing, and its status is premise false from the first late label"
	}
	return bound
}

// writeAnswer prints which learner answers for the filter (answer) and
// the bound its answers are held to.
func writeAnswer(w io.Writer, cfg *config.Config) {
	l := cfg.Learners[cfg.AnswerIndex()]
	how := "configured by answer"
	if cfg.Answer == "" {
		how = "the first learner: set answer to choose another"
	}
	fmt.Fprintf(w, "answer:\t%s (%s): its prediction is the filter's verdict, the answer of every prediction message and /v1/predict\n", l.Name, how)
	fmt.Fprintf(w, "  its bound:\t%s\n", learnerBound(l, len(cfg.Input.Classes), cfg.Labels.Delayed))
	if cfg.Models.By == "key" && cfg.Models.Global {
		fmt.Fprintf(w, "  per key:\twhat is served for a key, its model's or the global one's: mistakes ≤ 2.41·(1 + the fewer of the two models' mistakes on the key), in the key's report (mix)\n")
	}
}

// writeModelsPerKey writes, for check, how models per key are kept: by
// key, the bounds on the resident models and where the others go, the
// global model, what a key's model and a key's place in the index cost,
// and how many keys the index takes to fill the models' share alone.
func writeModelsPerKey(w io.Writer, m config.Models, cost keyCost) {
	fmt.Fprintf(w, "models:\tone per event key within each partition (models.by: key), each learning its key's events alone\n")
	idle := ""
	if m.Idle > 0 {
		idle = fmt.Sprintf(", and any not used for %v (models.idle),", m.Idle)
	}
	live := pipeline.LiveBytes(m.MaxBytes)
	bound := fmt.Sprintf("%s a partition for the models per key (models.max_bytes): the resident models with the index of every key seen are kept within half of it, %s, the other half being the collector's room", mib(uint64(m.MaxBytes)), mib(uint64(live)))
	switch {
	case m.MaxBytes > 0 && m.Max > 0:
		bound += fmt.Sprintf(", and at most %d models resident (models.max)", m.Max)
	case m.Max > 0:
		bound = fmt.Sprintf("at most %d models per partition (models.max)", m.Max)
	}
	fmt.Fprintf(w, "  resident:\t%s; past it the least recently used%s is spilled to a file in %s (models.spill_dir) and decoded on its key's next event\n",
		bound, idle, cmp.Or(m.SpillDir, "the system's temporary directory"))
	if m.Global {
		fmt.Fprintf(w, "  global:\ta global model per partition beside them (models.global): each key is served by its model or the global one, whichever has made fewer mistakes on the key\n")
	} else {
		fmt.Fprintf(w, "  global:\tnone (models.global false): each key is served by its own model\n")
	}
	if m.WarmStart != "" {
		fmt.Fprintf(w, "  warm start:\teach new key's model starts from %s (models.warm_start)\n", m.WarmStart)
	} else {
		fmt.Fprintf(w, "  warm start:\tnone: each new key's model starts empty\n")
	}
	fmt.Fprintf(w, "  memory:\teach key's model costs about %s new, plus about %.0f bytes a feature its key touched (its footprint after %d features)\n",
		mib(uint64(cost.new)), cost.perFeature, cost.features)
	if m.MaxBytes > 0 {
		n := live / int64(max(1, cost.new))
		fmt.Fprintf(w, "\t%s holds about %d new models, fewer as their keys touch features and as keys are seen: every key seen, resident or spilled, takes about %d bytes of it (a name of %d bytes: its counts, name and place in the spill; a spilled model's encoding is on disk)\n",
			mib(uint64(live)), n, cost.index, keyNameLen)
		fmt.Fprintf(w, "\tpast about %d keys seen a partition their index alone fills it: only the model in use stays resident, the index grows past models.max_bytes with the keys, and run and replay warn and raise the memory limit with it\n",
			live/max(1, cost.index))
	} else {
		fmt.Fprintf(w, "\tat most %d resident per partition: %s new, plus their features; a spilled key costs its encoding on disk and a few hundred bytes of heap\n",
			m.Max, mib(uint64(m.Max)*uint64(cost.new)))
	}
	if m.Global {
		fmt.Fprintf(w, "\tplus the global model: one more model per partition, of every key's features\n")
	}
}

// learnerCount says n learners in words: "1 learner", "8 learners".
func learnerCount(n int) string {
	if n == 1 {
		return "1 learner"
	}
	return fmt.Sprintf("%d learners", n)
}

// writeMemoryLimit writes, for check, the soft memory limit run and
// replay set for cfg's models per key (memoryLimit): the formula, what X
// is, and its bytes for one partition.
func writeMemoryLimit(w io.Writer, cfg *config.Config) {
	fmt.Fprintf(w, "  process:\trun and replay set a soft memory limit of models.max_bytes a partition + %s, %s with one partition, which holds RSS within models.max_bytes a partition + %s (the rest of the process, %s of it pages the limit does not count); GOMEMLIMIT replaces it, GOMEMLIMIT=off sets none\n",
		mib(memoryOverhead-memoryUncounted), mib(uint64(memoryLimit(cfg, nil))), mib(memoryOverhead), mib(memoryUncounted))
}

// writeConnections writes, for check, what a run of cfg connects to: its
// source and where a first start begins, its sinks, its checkpoints and
// its HTTP address.
func writeConnections(w io.Writer, cfg *config.Config) {
	fmt.Fprintf(w, "source:\t%s\n", describeSource(cfg.Source))
	if st := cfg.Source.Start; st != "" && st != "earliest" {
		fmt.Fprintf(w, "  a first start begins at %s (a consumer with a position resumes from it)\n", st)
	}
	for _, s := range []struct {
		name string
		s    *config.Sink
	}{{"predictions", cfg.Sinks.Predictions}, {"reports", cfg.Sinks.Reports}, {"dead letters", cfg.Sinks.DeadLetters}} {
		if s.s != nil {
			fmt.Fprintf(w, "%s:\t%s\n", s.name, describeSink(*s.s))
		}
	}
	if cfg.Sinks.DiscardDeadLetters {
		fmt.Fprintf(w, "dead letters:\toff: discarded, counted by reason in the report (sinks.dead_letters: off)\n")
	}
	c := cfg.Checkpoint
	every := cmp.Or(c.Every, service.DefaultCheckpointEvery) // 0: the default, as run takes it
	switch {
	case c.Dir != "":
		fmt.Fprintf(w, "checkpoints:\tdirectory %s, every %d events\n", c.Dir, every)
	case c.Bucket != "":
		fmt.Fprintf(w, "checkpoints:\tobject store bucket %s, every %d events, ownership lease %v\n", c.Bucket, every, cmp.Or(c.Lease, config.MaxLease))
	default:
		fmt.Fprintf(w, "checkpoints:\tnone: a restart learns from the committed position with fresh models\n")
	}
	if cfg.HTTP.Addr != "" {
		fmt.Fprintf(w, "http:\t%s\n", cfg.HTTP.Addr)
	}
}

func list(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return ", " + strings.Join(s, ", ")
}

// describeSource says what run reads of s, each unset key as the
// default run takes for it.
func describeSource(s config.Source) string {
	switch s.Kind {
	case "":
		return "none (replay reads files; run needs one)"
	case "file":
		return "file " + s.Path
	case "embedded":
		js := embeddedSource(s, "")
		return fmt.Sprintf("an embedded NATS JetStream server on 127.0.0.1:%d, files in %s; stream %s, subject %s, durable %s",
			cmp.Or(s.Port, 4222), cmp.Or(s.StoreDir, "a temporary directory"), js.Stream, js.Subject, js.Durable)
	case "kafka":
		return fmt.Sprintf("kafka topic %s at %s, group %s", s.Topic, strings.Join(s.Brokers, ","), cmp.Or(s.Group, "streamlearn"))
	case "jetstream":
		return fmt.Sprintf("jetstream stream %s, subject %s at %s, durable %s", cmp.Or(s.Stream, connectors.DefaultJetStreamStream),
			cmp.Or(s.Subject, connectors.DefaultNATSSubject), cmp.Or(s.URL, connectors.DefaultNATSURL), cmp.Or(s.Durable, connectors.DefaultJetStreamDurable))
	default:
		return fmt.Sprintf("%s subject %s at %s", s.Kind, cmp.Or(s.Subject, connectors.DefaultNATSSubject), cmp.Or(s.URL, connectors.DefaultNATSURL))
	}
}

func describeSink(s config.Sink) string {
	switch s.Kind {
	case "file":
		return "file " + s.Path
	case "kafka":
		return "kafka topic " + s.Topic
	case "jetstream":
		return fmt.Sprintf("jetstream stream %s, subject %s", s.Stream, s.Subject)
	default:
		return s.Kind + " subject " + s.Subject
	}
}

// modelMemory builds one model of cfg and returns the heap it holds. A
// model built before it makes the process's one-time allocations (tables
// made on first use), which are not the model's.
func modelMemory(cfg *config.Config) (uint64, error) {
	if _, err := pipeline.New(cfg); err != nil {
		return 0, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p, err := pipeline.New(cfg)
	if err != nil {
		return 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(p)
	if after.HeapAlloc < before.HeapAlloc {
		return 0, nil
	}
	return after.HeapAlloc - before.HeapAlloc, nil
}

// keyCost is what a key's model costs: its footprint new
// (pipeline.Pipeline.Footprint, counted in models.max_bytes), and per
// feature its key touched, measured over features; and index, what a key
// of a name of keyNameLen bytes holds in the keys' index whether its
// model is resident or not (pipeline.KeyIndexBytes, counted in
// models.max_bytes too).
type keyCost struct {
	new        int
	perFeature float64
	features   int
	index      int64
}

// keyNameLen is the length of the key names check counts the keys'
// index of.
const keyNameLen = 16

// keyedCost builds a key's model of cfg, as models per key do (sparse),
// teaches it labeled events of distinct features, and returns its cost.
func keyedCost(cfg *config.Config) (keyCost, error) {
	ec := pipeline.EventConfig(cfg)
	labels := [2]string{"1", "0"}
	if len(ec.Classes) > 0 {
		labels = [2]string{ec.Classes[0], ec.Classes[1]}
	}
	var ys [2]int8
	for i, l := range labels {
		var err error
		if ys[i], err = ec.ParseLabel(l); err != nil {
			return keyCost{}, err
		}
	}
	c := keyCost{features: min(1024, 1<<cfg.Features.Bits/2)}
	perEvent := min(8, c.features)
	p, err := pipeline.NewBuilder(cfg).Sparse().New()
	if err != nil {
		return keyCost{}, err
	}
	c.new = p.Footprint()
	c.index = pipeline.KeyIndexBytes(keyNameLen, len(p.Names()), cfg.Models.Global)
	// Each event touches perEvent features not touched before, spread
	// over the slots; a round's label alternates.
	stride := uint32(1<<cfg.Features.Bits) / uint32(c.features)
	ev := event.Event{Labeled: true}
	for f := 0; f+perEvent <= c.features; f += perEvent {
		ev.X.Idx, ev.X.Val = ev.X.Idx[:0], ev.X.Val[:0]
		for j := range perEvent {
			ev.X.Idx = append(ev.X.Idx, uint32(f+j)*stride)
			ev.X.Val = append(ev.X.Val, 1)
		}
		ev.Label = ys[f/perEvent%2]
		p.Process(&ev)
	}
	c.perFeature = float64(p.Footprint()-c.new) / float64(c.features)
	return c, nil
}

func mib(b uint64) string {
	switch {
	case b < 1<<10:
		return fmt.Sprintf("%d bytes", b)
	case b < 1<<20:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	case b < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}
