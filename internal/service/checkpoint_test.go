package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/learners"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// runStore runs a Service with checkpoints in store over recs (all of
// them from the first, as a source re-reading from an old commit does)
// and returns its reports and commits.
func runStore(t *testing.T, c *config.Config, store checkpoint.Store, values [][]byte, partitions int32, every int) ([]Report, []connectors.Record, error) {
	t.Helper()
	src := newMemSource(values, partitions)
	s := newService(t, Options{Config: c, Source: src, Checkpoints: store, CommitEvery: every})
	err := s.Run(context.Background())
	reps, rerr := s.Reports()
	if rerr != nil {
		t.Fatal(rerr)
	}
	return reps, src.commitLog(), err
}

// A run cut anywhere and resumed from its checkpoints ends with the models
// of an uninterrupted run: the second run re-reads the stream from the
// start (as after a crash between a checkpoint and its commit) and skips
// what the restored models already hold.
func TestCheckpointResume(t *testing.T) {
	c := loadExampleConfig(t)
	c.Features.Bits = 12                        // small checkpoints: 2^18 ones take seconds each under -race
	values := genEvents(3000, 5, 0.05, 0.1, 97) // noise, unlabeled and bad records
	const parts = 3
	want, _, err := runStore(t, c, nil, values, parts, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{1, 700, 2999} {
		store, err := checkpoint.OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := runStore(t, c, store, values[:cut], parts, 250); err != nil {
			t.Fatal(err)
		}
		got, commits, err := runStore(t, c, store, values, parts, 250)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("cut %d: %d models, want %d", cut, len(got), len(want))
		}
		for i := range want {
			sameReport(t, "resumed", got[i].Report, want[i].Report)
		}
		// Every partition is committed up to its last record.
		last := map[int32]int64{}
		for _, r := range commits {
			last[r.Partition] = max(last[r.Partition], r.Offset)
		}
		for p := range int32(parts) {
			if wantLast := int64(len(values)/parts - 1); last[p] != wantLast {
				t.Errorf("cut %d: partition %d committed up to %d, want %d", cut, p, last[p], wantLast)
			}
		}
		// Restarted with nothing left to read, it still has its models.
		idle, _, err := runStore(t, c, store, nil, parts, 250)
		if err != nil {
			t.Fatal(err)
		}
		if len(idle) != len(want) {
			t.Fatalf("cut %d, restart with nothing to read: %d models, want %d", cut, len(idle), len(want))
		}
		for i := range want {
			sameReport(t, "restarted idle", idle[i].Report, want[i].Report)
		}
		// What inspect reads: the position and the report of each model.
		for p := range int32(parts) {
			cp, err := store.Load(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if cp.Position != int64(len(values)/parts-1) || !strings.Contains(string(cp.Report), want[p].Learners[0].StateSHA256) {
				t.Errorf("cut %d: checkpoint of partition %d: position %d, report %.80s", cut, p, cp.Position, cp.Report)
			}
		}
	}
}

// A checkpoint of another model configuration, of another source, or
// damaged, stops the service: never a silent fresh start.
func TestCheckpointRefused(t *testing.T) {
	c := loadExampleConfig(t)
	values := genEvents(200, 5, 0, 0, 0)
	dir := t.TempDir()
	store, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runStore(t, c, store, values, 1, 0); err != nil {
		t.Fatal(err)
	}

	other := *c
	other.Learners = append([]config.Learner(nil), c.Learners...)
	pc := *other.Learners[0].Params.(*online.PerceptronConfig)
	pc.Bias = !pc.Bias
	other.Learners[0].Params = &pc
	if _, _, err := runStore(t, &other, store, values, 1, 0); err == nil ||
		!strings.Contains(err.Error(), "another model configuration (learner "+c.Learners[0].Name+" (perceptron): settings changed): keep the other learners' models and start these afresh with `run --reset-learner "+c.Learners[0].Name+"`") {
		t.Errorf("another configuration: %v", err)
	}
	// Other features: nothing can be kept.
	other.Features.Bits++
	if _, _, err := runStore(t, &other, store, values, 1, 0); err == nil ||
		!strings.Contains(err.Error(), "another model configuration (the input, the features or the labels settings differ, or the domain of the learners over a table or conjunctions class, whose events outside it no learner sees: no learner's model can be kept): move it away") {
		t.Errorf("other features: %v", err)
	}
	other.Features = c.Features
	// A learner added and one dropped: the error says which.
	last := c.Learners[len(c.Learners)-1]
	other.Learners = append(append([]config.Learner(nil), c.Learners[:len(c.Learners)-1]...),
		config.Learner{Name: "extra", Algorithm: "majority", Params: &learners.NoParams{}})
	if _, _, err := runStore(t, &other, store, values, 1, 0); err == nil ||
		!strings.Contains(err.Error(), "(learner extra (majority) added; learner "+last.Name+" ("+last.Algorithm+") dropped): keep the other learners' models and start these afresh with `run --reset-learner extra --reset-learner "+last.Name+"`") {
		t.Errorf("learners added and dropped: %v", err)
	}

	s := newService(t, Options{Config: c, Source: named{newMemSource(values, 1), "mem:other"}, Checkpoints: store})
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "is of source mem:test, not mem:other") {
		t.Errorf("another source: %v", err)
	}

	b, err := os.ReadFile(store.File(0))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(store.File(0), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runStore(t, c, store, values, 1, 0); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Errorf("damaged checkpoint: %v, want ErrCorrupt", err)
	}
}

type named struct {
	connectors.Source
	name string
}

func (n named) Name() string { return n.name }

// ofConsumer is a source that says which consumer it reads as (a Kafka
// group), and that nothing is committed.
type ofConsumer struct {
	connectors.Source
	consumer string
}

func (s ofConsumer) Position(int32) (connectors.Position, bool) {
	return connectors.Position{Committed: -1, Start: -1, Consumer: s.consumer}, true
}

// downgrade rewrites the checkpoint file at path in format version 2, as
// a build before checkpoints held their consumer wrote it: without the
// consumer field (an empty one, a uint64 length of 0, at the body's end).
func downgrade(t *testing.T, path string) {
	t.Helper()
	c, err := checkpoint.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c.Consumer = ""
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b = b[:len(b)-sha256.Size-8]
	const header = 8 + 4 + 8 // magic, version, body length
	binary.LittleEndian.PutUint32(b[8:], 2)
	binary.LittleEndian.PutUint64(b[12:], uint64(len(b)-header))
	sum := sha256.Sum256(b)
	if err := os.WriteFile(path, append(b, sum[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := checkpoint.ReadFile(path); err != nil || c.Format != 2 {
		t.Fatalf("downgraded checkpoint: %s, %v", consumerOf(c), err)
	}
}

// A checkpoint is its consumer's: one a Kafka group wrote stops another
// group's Run with a RestoreError naming both groups and the ways out,
// before anything is learned or published; --accept takes it over for the
// new group. A checkpoint of format version 2, which does not hold its
// consumer, is restored with a warning saying that the consumer could not
// be checked, and its next save records the consumer.
func TestCheckpointOfAnotherConsumer(t *testing.T) {
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	values := genEvents(600, 5, 0, 0, 0)
	store, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run := func(group string, on Mismatch, out connectors.Sink, logs *strings.Builder) ([]Report, error) {
		t.Helper()
		return runLogged(t, Options{Config: c, Source: ofConsumer{newMemSource(values, 1), "kafka group " + group}, Checkpoints: store,
			CommitEvery: 100, OnMismatch: on, Predictions: out}, logs)
	}
	if _, err := run("gx", MismatchFail, discardSink{}, nil); err != nil {
		t.Fatal(err)
	}
	saved, err := checkpoint.ReadFile(store.File(0))
	if err != nil {
		t.Fatal(err)
	}
	if saved.Consumer != "kafka group gx" || saved.Position != 599 {
		t.Fatalf("gx's checkpoint: consumer %q position %d, want \"kafka group gx\" 599", saved.Consumer, saved.Position)
	}

	out := &memSink{}
	reps, err := run("gy", MismatchFail, out, nil)
	var re *RestoreError
	if !errors.As(err, &re) {
		t.Fatalf("group gy on gx's checkpoint: %v, want a RestoreError", err)
	}
	for _, w := range []string{"the checkpoint is of kafka group gx, this source reads as kafka group gy", "Run as kafka group gx",
		"give kafka group gy a checkpoint directory or bucket of its own", "--rebuild", "--reset", "--accept"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	var learned uint64
	for _, r := range reps {
		learned += r.Report.Events
	}
	if len(out.msgs) != 0 || learned != 0 {
		t.Errorf("group gy refused: %d predictions published, %d events learned; want none", len(out.msgs), learned)
	}
	if again, err := checkpoint.ReadFile(store.File(0)); err != nil || again.Consumer != "kafka group gx" || !again.Created.Equal(saved.Created) {
		t.Errorf("after the refusal the checkpoint is %v's, %v; want gx's, untouched", consumerOf(again), err)
	}

	// Format version 2: restored with a warning, then recorded as gy's.
	downgrade(t, store.File(0))
	var logs strings.Builder
	reps, err = run("gy", MismatchFail, discardSink{}, &logs)
	if err != nil {
		t.Fatalf("gy on a version 2 checkpoint: %v", err)
	}
	if len(reps) != 1 || reps[0].Report.Events != 600 {
		t.Errorf("gy on a version 2 checkpoint: %d reports, want one of the restored model's 600 events", len(reps))
	}
	if !strings.Contains(logs.String(), `level=WARN msg="the checkpoint's consumer could not be checked`) ||
		!strings.Contains(logs.String(), `format=2 consumer="kafka group gy"`) {
		t.Errorf("no warning that the consumer could not be checked:\n%s", logs.String())
	}
	if now, err := checkpoint.ReadFile(store.File(0)); err != nil || now.Consumer != "kafka group gy" || now.Format != checkpoint.FormatVersion {
		t.Errorf("after gy's run the checkpoint is %q's, %v; want gy's, of format %d", consumerOf(now), err, checkpoint.FormatVersion)
	}

	// gx's run now meets gy's checkpoint; --accept takes it over.
	if _, err := run("gx", MismatchFail, discardSink{}, nil); !errors.As(err, &re) || !strings.Contains(re.Problem, "of kafka group gy, this source reads as kafka group gx") {
		t.Errorf("gx on gy's checkpoint: %v", err)
	}
	reps, err = run("gx", MismatchAccept, discardSink{}, nil)
	if err != nil || len(reps) != 1 || reps[0].Report.Events != 600 {
		t.Errorf("gx accepting gy's checkpoint: %v, %d reports; want the restored model's 600 events", err, len(reps))
	}
	if now, err := checkpoint.ReadFile(store.File(0)); err != nil || now.Consumer != "kafka group gx" {
		t.Errorf("after the acceptance the checkpoint is %q's, %v; want gx's", consumerOf(now), err)
	}
}

// consumerOf returns c's consumer and format, for errors.
func consumerOf(c *checkpoint.Checkpoint) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("%s (format %d)", c.Consumer, c.Format)
}

// failingStore fails its saves while fail is set, and counts them.
type failingStore struct {
	checkpoint.Store
	fail  atomic.Bool
	saves atomic.Int64
}

func (f *failingStore) Save(ctx context.Context, c *checkpoint.Checkpoint) error {
	f.saves.Add(1)
	if f.fail.Load() {
		return errors.New("no space left on device")
	}
	return f.Store.Save(ctx, c)
}

func init() {
	// Tests whose saves fail on purpose (held up, a full disk) resume in
	// milliseconds; TestCheckpointSaveBackoff sets its own.
	saveBackoffMin, saveBackoffMax = 5*time.Millisecond, 20*time.Millisecond
}

// After a failed save, no checkpoint is tried (nor its failure logged)
// until the backoff is over: over a stream whose commit rounds come every
// 10 records, a store that always fails is tried once while running and
// once at the end, and one error is logged, not one per round.
func TestCheckpointSaveBackoff(t *testing.T) {
	defer func(lo, hi time.Duration) { saveBackoffMin, saveBackoffMax = lo, hi }(saveBackoffMin, saveBackoffMax)
	saveBackoffMin, saveBackoffMax = time.Minute, time.Minute
	c := loadExampleConfig(t)
	dir, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &failingStore{Store: dir}
	store.fail.Store(true)
	var logs strings.Builder
	src := newMemSource(genEvents(5000, 5, 0, 0, 0), 1)
	s := newService(t, Options{Config: c, Source: src, Checkpoints: store, CommitEvery: 10,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := s.Run(context.Background()); err == nil {
		t.Fatal("Run with failing checkpoints: nil error")
	}
	if n := store.saves.Load(); n != 2 {
		t.Errorf("%d saves over 500 commit rounds, want 2 (the first round's and the final one)", n)
	}
	if n := strings.Count(logs.String(), "checkpoint failed"); n > 2 {
		t.Errorf("%d checkpoint failures logged, want at most 2:\n%s", n, logs.String())
	}
}

// While checkpoints fail, nothing is committed and the checkpoint age
// grows; the final drain reports the failure; once saves succeed again,
// everything learned is committed.
func TestCheckpointFailureStopsCommits(t *testing.T) {
	c := loadExampleConfig(t)
	values := genEvents(500, 5, 0, 0, 0)
	dir, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &failingStore{Store: dir}
	store.fail.Store(true)
	_, commits, err := runStore(t, c, store, values, 1, 100)
	if len(commits) != 0 {
		t.Errorf("%d commits while checkpoints fail, want none", len(commits))
	}
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("Run with failing checkpoints: %v, want the save's error", err)
	}
	if _, err := dir.Load(context.Background(), 0); !checkpoint.IsNotExist(err) {
		t.Errorf("a checkpoint exists after failing saves: %v", err)
	}
	store.fail.Store(false)
	_, commits, err = runStore(t, c, store, values, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(commits); n == 0 || commits[n-1].Offset != 499 {
		t.Errorf("commits after recovery: %v, want up to offset 499", commits)
	}
}

// outageSource is a memSource whose Commit fails from the fail-th call to
// the heal-th (a broker away for a while).
type outageSource struct {
	*memSource
	calls      int
	fail, heal int
}

func (s *outageSource) Commit(ctx context.Context, r connectors.Record) error {
	s.calls++
	if s.calls >= s.fail && s.calls <= s.heal {
		return errors.New("dial tcp 127.0.0.1:9092: connect: connection refused")
	}
	return s.memSource.Commit(ctx, r)
}

// A broker outage is logged once when commits begin to fail and once when
// they succeed again, with how many failed and for how long, not at every
// round; learning goes on meanwhile and the first commit after it holds
// everything learned.
func TestCommitOutageLogged(t *testing.T) {
	c := loadExampleConfig(t)
	src := &outageSource{memSource: newMemSource(genEvents(5000, 5, 0, 0, 0), 1), fail: 3, heal: 22}
	var logs strings.Builder
	s := newService(t, Options{Config: c, Source: src, CommitEvery: 10, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "commits fail"); n != 1 {
		t.Errorf("outage begun logged %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "commits succeed again"); n != 1 || !strings.Contains(out, "failed_rounds=20") {
		t.Errorf("outage ended logged %d times (want once, with failed_rounds=20):\n%s", n, out)
	}
	commits := src.commitLog()
	if n := len(commits); n == 0 || commits[n-1].Offset != 4999 {
		t.Fatalf("commits %v, want the last at offset 4999", commits)
	}
	reps, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	if reps[0].Events != 5000 {
		t.Errorf("%d events learned across the outage, want 5000", reps[0].Events)
	}
}

// premadeSource is a memSource whose end waits for the memory of the
// models' first checkpoints (Service.premaking), so that the final
// checkpoint, the run's first, is taken into it.
type premadeSource struct {
	*memSource
	s *Service
}

func (p *premadeSource) Fetch(ctx context.Context) (connectors.Record, error) {
	r, err := p.memSource.Fetch(ctx)
	if errors.Is(err, connectors.ErrEndOfInput) {
		p.s.models.premaking.Wait()
	}
	return r, err
}

// A model's first checkpoint is copied into memory made beforehand on
// another goroutine (worker.premake), not into 10 MiB the worker
// allocates and pages in between two records; and the checkpoint it
// makes is the model's state as a take into fresh memory has it.
func TestFirstCheckpointPremade(t *testing.T) {
	c := loadExampleConfig(t) // eight learners, bits 18: 10 MiB of weights
	store, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := &premadeSource{memSource: newMemSource(genEvents(2000, 3, 0.05, 0.1, 0), 1)}
	// One checkpoint, the final one, after the premade memory is made.
	s := newService(t, Options{Config: c, Source: src, Checkpoints: store, CommitEvery: 1 << 30, CommitInterval: time.Hour, HistoryPoints: 64})
	src.s = s
	run(t, s)
	w := s.models.workers[0]
	if !w.premade.used.Load() {
		t.Fatal("the first checkpoint was not taken into the premade memory")
	}
	saved, err := store.Load(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := w.m.p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(saved.State, want) {
		t.Fatalf("the checkpoint taken into the premade memory (%d bytes) is not the model's state (%d bytes)", len(saved.State), len(want))
	}
	rep, err := w.report()
	if err != nil {
		t.Fatal(err)
	}
	var got pipeline.Report
	if err := json.Unmarshal(saved.Report, &got); err != nil {
		t.Fatal(err)
	}
	got.Seconds = rep.Seconds // when the report was taken
	gotReport, _ := json.Marshal(got)
	wantReport, err := json.Marshal(rep.Report)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotReport, wantReport) {
		t.Fatalf("the checkpoint's report is not the model's:\n%s\n%s", saved.Report, wantReport)
	}

	// What the worker allocates at a first take, with and without.
	allocated := func(premade bool) uint64 {
		if premade {
			w.premade.took.Store(false)
			w.premake(context.Background(), make(chan struct{}, 1), c, 64)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := w.take(nil, nil); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	fresh, premade := allocated(false), allocated(true)
	if fresh < 4<<20 || premade > 1<<20 {
		t.Fatalf("a first take allocated %d bytes into fresh memory and %d into premade memory; want ≥ 4 MiB and ≤ 1 MiB", fresh, premade)
	}
	t.Logf("a first take allocates %d bytes; into the premade memory %d", fresh, premade)
	// Made after a take, the memory would be a third copy of the weights
	// for the worker's life: it is not kept.
	w.premake(context.Background(), make(chan struct{}, 1), c, 64)
	if w.premade.frozen.Load() != nil {
		t.Fatal("memory premade after the model's first take is kept")
	}
}

// spareSource is a memSource whose first fetch waits until the spare
// model is made and notes it, whose second notes the memory the first
// partition's first checkpoint is to go into, and whose end waits for
// the other partitions' (Service.premaking). It runs on the loop's
// goroutine: the service's fields are its own to read.
type spareSource struct {
	*memSource
	s       *Service
	fetches int
	spare   spareModel
	spareAt time.Time        // a while after the spare was made
	premade *pipeline.Frozen // the first partition's, before its first take
}

func (p *spareSource) Fetch(ctx context.Context) (connectors.Record, error) {
	switch p.fetches++; p.fetches {
	case 1:
		if p.s.models.spare != nil {
			p.spare = <-p.s.models.spare
			p.s.models.spare <- p.spare
			time.Sleep(50 * time.Millisecond) // the first record comes later
			p.spareAt = time.Now()
		}
	case 2:
		p.premade = p.s.models.workers[p.memSource.recs[0].Partition].premade.frozen.Load()
	}
	r, err := p.memSource.Fetch(ctx)
	if errors.Is(err, connectors.ErrEndOfInput) {
		p.s.models.premaking.Wait()
	}
	return r, err
}

// The model of the first partition is made before its first record comes
// (models.makeSpare), with the memory of its first checkpoint; a second
// partition's is made when it comes, and its first checkpoint's memory by
// premake. Both runs end as a replay of each partition's records does.
// A spare not ready when the first record comes is dropped. Models per
// key get no spare.
func TestSpareModel(t *testing.T) {
	c := loadExampleConfig(t)
	for _, ckpt := range []bool{true, false} {
		var store checkpoint.Store
		if ckpt {
			var err error
			if store, err = checkpoint.OpenDir(t.TempDir()); err != nil {
				t.Fatal(err)
			}
		}
		values := genEvents(3000, 4, 0.05, 0.1, 0)
		src := &spareSource{memSource: newMemSource(values, 2)}
		s := newService(t, Options{Config: c, Source: src, Checkpoints: store, CommitEvery: 1 << 30, CommitInterval: time.Hour})
		src.s = s
		run(t, s)
		if src.spare.m == nil || ckpt != (src.spare.frozen != nil) {
			t.Fatalf("checkpoints %v: spare %+v, want a model, and a copy with checkpoints", ckpt, src.spare)
		}
		if s.models.spare != nil {
			t.Fatal("the spare model was not taken")
		}
		first := src.memSource.recs[0].Partition
		if s.models.workers[first].m != src.spare.m {
			t.Fatalf("the model of partition %d, the first to come, is not the spare", first)
		}
		if src.premade != src.spare.frozen {
			t.Fatalf("the first checkpoint of partition %d is not to go into the spare's copy", first)
		}
		for p, w := range s.models.workers {
			if p != first && w.m == src.spare.m {
				t.Fatalf("partition %d has the spare model too", p)
			}
			if ckpt && !w.premade.used.Load() {
				t.Errorf("partition %d's first checkpoint was not taken into memory made beforehand", p)
			}
			var data []byte
			for _, r := range src.memSource.recs {
				if r.Partition == p {
					data = append(append(data, r.Value...), '\n')
				}
			}
			got, err := w.report()
			if err != nil {
				t.Fatal(err)
			}
			if since := time.Since(src.spareAt); p == first && got.Seconds > since.Seconds() {
				t.Errorf("partition %d's report counts %.3f s, more than the %.3f s since its first record", p, got.Seconds, since.Seconds())
			}
			sameReport(t, fmt.Sprintf("checkpoints %v, partition %d", ckpt, p), got.Report, replayReport(t, c, data))
		}
	}
	s := newService(t, Options{Config: c, Source: newMemSource(genEvents(100, 4, 0, 0, 0), 1)})
	run(t, s) // the first record comes at once
	if s.models.spare != nil {
		t.Error("a spare model not taken is kept")
	}
	keyedCfg := parseYAML(t, keyedConfig)
	src := &spareSource{memSource: newMemSource(genEvents(100, 4, 0, 0, 0), 1)}
	s = newService(t, Options{Config: keyedCfg, Source: src})
	src.s = s
	run(t, s)
	if src.spare.m != nil {
		t.Error("a spare model was made for models per key")
	}
}

// savedStore records every checkpoint saved.
type savedStore struct {
	checkpoint.Store
	mu    sync.Mutex
	saved []*checkpoint.Checkpoint
}

func (s *savedStore) Save(ctx context.Context, c *checkpoint.Checkpoint) error {
	s.mu.Lock()
	s.saved = append(s.saved, c)
	s.mu.Unlock()
	return s.Store.Save(ctx, c)
}

// With models per key, a checkpoint is taken as for a model per
// partition (the encodings of the models that learned since the last
// one, a copy of the global model) and completed on the saver: every
// checkpoint of runs whose keys are evicted and decoded again, each
// resuming from the last, holds the state a replay of the records up to
// its position makes; the last one's report is the models' with the
// global model's digests.
func TestKeyedCheckpointTaken(t *testing.T) {
	c := parseYAML(t, keyedPlain+"models: {by: key, max: 3, global: true}\n")
	dir, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &savedStore{Store: dir}
	lines := keyedLines(3000, []string{"a", "b", "c", "d", "e", "f", "g"})
	for _, n := range []int{700, 1900, 3000} { // three runs, each resuming from the last checkpoint
		src := newMemSource(lines[:n], 1)
		s := newService(t, Options{Config: c, Source: src, Checkpoints: store, CommitEvery: 250})
		run(t, s)
		got, err := store.Load(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		w := s.models.workers[0]
		rep, err := w.report()
		if err != nil {
			t.Fatal(err)
		}
		var r pipeline.Report
		if err := json.Unmarshal(got.Report, &r); err != nil {
			t.Fatal(err)
		}
		if r.Global == nil || r.Global.Learners[0].StateSHA256 == "" {
			t.Fatalf("after %d records: the checkpoint's report has no global model digest: %s", n, got.Report)
		}
		r.Seconds, r.Global.Seconds = rep.Seconds, rep.Global.Seconds // when each was taken
		gotReport, _ := json.Marshal(r)
		wantReport, _ := json.Marshal(rep.Report)
		if !bytes.Equal(gotReport, wantReport) {
			t.Fatalf("after %d records: the checkpoint's report is not the models':\n%s\n%s", n, gotReport, wantReport)
		}
	}
	// A commit round every 250 records makes 12 when each round's save
	// ends before the next round; a loaded machine coalesces rounds (one
	// in flight at a time), so only some are sure to be along the way.
	if len(store.saved) <= 3 {
		t.Fatalf("%d checkpoints over three runs: none was taken along the way", len(store.saved))
	}
	// Each against a replay of the records up to its position (equal
	// models give equal bytes, whatever was evicted when).
	dec, err := event.NewDecoder(pipeline.EventConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	k, err := pipeline.NewKeyed(c, pipeline.KeyedOptions{Max: c.Models.Max, Global: true})
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	next := 0
	for _, ck := range store.saved {
		for ; next <= int(ck.Position); next++ {
			if err := dec.Decode(lines[next], &ev); err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := k.Process(&ev); err != nil {
				t.Fatal(err)
			}
		}
		want, err := k.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ck.State, want) {
			t.Fatalf("the checkpoint at position %d is not the replay's state up to it", ck.Position)
		}
	}
}

// The same refusal with the checkpoints in an Object Store bucket: the
// checkpoint holds its group there too, and another group's run stops
// before publishing anything.
func TestCheckpointOfAnotherConsumerBucket(t *testing.T) {
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	values := genEvents(300, 5, 0, 0, 0)
	js := testbroker.JetStream(t, testbroker.NATS(t, "UNUSED", "unused"))
	store, err := checkpoint.OpenObjectStore(context.Background(), js, "STATE", checkpoint.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(group string, out connectors.Sink) error {
		t.Helper()
		s := newService(t, Options{Config: c, Source: ofConsumer{newMemSource(values, 1), "kafka group " + group}, Checkpoints: store,
			CommitEvery: 100, Predictions: out})
		return s.Run(context.Background())
	}
	if err := run("gx", discardSink{}); err != nil {
		t.Fatal(err)
	}
	if saved, err := store.Load(context.Background(), 0); err != nil || saved.Consumer != "kafka group gx" || saved.Position != 299 {
		t.Fatalf("gx's checkpoint in the bucket: %s, %v; want kafka group gx's at 299", consumerOf(saved), err)
	}
	out := &memSink{}
	var re *RestoreError
	if err := run("gy", out); !errors.As(err, &re) || !strings.Contains(err.Error(), "the checkpoint is of kafka group gx, this source reads as kafka group gy") {
		t.Errorf("group gy on gx's bucket: %v, want a RestoreError naming both groups", err)
	}
	if len(out.msgs) != 0 {
		t.Errorf("group gy refused: %d predictions published, want none", len(out.msgs))
	}
}

// ofDurable is a source read as the JetStream durable durable of stream
// EVENTS: its name holds the durable, as JetStreamSource's does.
type ofDurable struct {
	connectors.Source
	durable string
}

func (s ofDurable) Name() string { return "jetstream:EVENTS/" + s.durable }

func (s ofDurable) Position(int32) (connectors.Position, bool) {
	return connectors.Position{Committed: -1, Start: -1, Consumer: "jetstream durable " + s.durable}, true
}

// TestCheckpointOfAnotherDurable: a JetStream durable on another
// durable's checkpoint is a consumer mismatch, as a Kafka group on
// another's is: a RestoreError with the ways out, refused before the
// source opens too (CheckConsumer), and --reset and --accept honoured; a
// checkpoint that does not hold its consumer (written before JetStream
// checkpoints did) takes the durable its source's name holds.
func TestCheckpointOfAnotherDurable(t *testing.T) {
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	values := genEvents(600, 5, 0, 0, 0)
	store, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run := func(durable string, on Mismatch, out connectors.Sink, logs *strings.Builder) ([]Report, error) {
		t.Helper()
		return runLogged(t, Options{Config: c, Source: ofDurable{newMemSource(values, 1), durable}, Checkpoints: store,
			CommitEvery: 100, OnMismatch: on, Predictions: out}, logs)
	}
	events := func(reps []Report) (n uint64) {
		for _, r := range reps {
			n += r.Report.Events
		}
		return n
	}
	if _, err := run("da", MismatchFail, discardSink{}, nil); err != nil {
		t.Fatal(err)
	}
	saved, err := checkpoint.ReadFile(store.File(0))
	if err != nil {
		t.Fatal(err)
	}
	if saved.Consumer != "jetstream durable da" || saved.Source != "jetstream:EVENTS/da" || saved.Position != 599 {
		t.Fatalf("da's checkpoint: source %s, consumer %q, position %d; want jetstream:EVENTS/da, jetstream durable da, 599", saved.Source, saved.Consumer, saved.Position)
	}
	refused := func(when string) {
		t.Helper()
		out := &memSink{}
		reps, err := run("db", MismatchFail, out, nil)
		var re *RestoreError
		if !errors.As(err, &re) {
			t.Fatalf("%s: durable db on da's checkpoint: %v, want a RestoreError", when, err)
		}
		for _, w := range []string{"the checkpoint is of jetstream durable da, this source reads as jetstream durable db", "Run as jetstream durable da",
			"give jetstream durable db a checkpoint directory or bucket of its own", "--rebuild", "--reset", "--accept"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", when, err, w)
			}
		}
		if len(out.msgs) != 0 || events(reps) != 0 {
			t.Errorf("%s: durable db refused: %d predictions published, %d events learned; want none", when, len(out.msgs), events(reps))
		}
		// Before the source opens: the same error.
		pre := CheckConsumer(context.Background(), store, "jetstream:EVENTS/db")
		if pre == nil || pre.Error() != err.Error() {
			t.Errorf("%s: before the source opens: %v; want %v", when, pre, err)
		}
		for _, name := range []string{"jetstream:EVENTS/da", "jetstream:OTHER/db", "kafka:events"} {
			if err := CheckConsumer(context.Background(), store, name); err != nil {
				t.Errorf("%s: before %s opens: %v, want nil (not another durable of the stream)", when, name, err)
			}
		}
	}
	refused("format 3")
	if again, err := checkpoint.ReadFile(store.File(0)); err != nil || again.Consumer != "jetstream durable da" || !again.Created.Equal(saved.Created) {
		t.Errorf("after the refusal the checkpoint is %v's, %v; want da's, untouched", consumerOf(again), err)
	}

	// A JetStream checkpoint without its consumer, as builds before
	// wrote them: the durable its source's name holds.
	saved.Consumer = ""
	if err := store.Save(context.Background(), saved); err != nil {
		t.Fatal(err)
	}
	if now, err := checkpoint.ReadFile(store.File(0)); err != nil || now.Consumer != "" {
		t.Fatalf("checkpoint without a consumer: %s, %v", consumerOf(now), err)
	}
	refused("no consumer held")
	downgrade(t, store.File(0))
	refused("format 2")
	var logs strings.Builder
	reps, err := run("da", MismatchFail, discardSink{}, &logs)
	if err != nil || events(reps) != 600 {
		t.Fatalf("da on its own format 2 checkpoint: %v, %d events; want the restored model's 600", err, events(reps))
	}
	if strings.Contains(logs.String(), "could not be checked") {
		t.Errorf("da on its own checkpoint warns that its consumer could not be checked:\n%s", logs.String())
	}

	// --reset: db starts afresh, and the checkpoint is db's.
	reps, err = run("db", MismatchReset, discardSink{}, nil)
	if err != nil || events(reps) != 600 {
		t.Errorf("db with reset: %v, %d events; want a fresh model of the 600 records", err, events(reps))
	}
	if now, err := checkpoint.ReadFile(store.File(0)); err != nil || now.Consumer != "jetstream durable db" || now.Source != "jetstream:EVENTS/db" {
		t.Errorf("after the reset the checkpoint is %s's, %v; want db's", consumerOf(now), err)
	}
	// --accept: da takes db's model over.
	reps, err = run("da", MismatchAccept, discardSink{}, nil)
	if err != nil || events(reps) != 600 {
		t.Errorf("da accepting db's checkpoint: %v, %d events; want the restored model's 600", err, events(reps))
	}
	if now, err := checkpoint.ReadFile(store.File(0)); err != nil || now.Consumer != "jetstream durable da" {
		t.Errorf("after the acceptance the checkpoint is %s's, %v; want da's", consumerOf(now), err)
	}
}

// runLogged runs a service of opt to its end, its log in logs when that
// is not nil, and returns its reports and Run's error.
func runLogged(t *testing.T, opt Options, logs *strings.Builder) ([]Report, error) {
	t.Helper()
	if logs != nil {
		opt.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	s := newService(t, opt)
	err := s.Run(context.Background())
	reps, rerr := s.Reports()
	if rerr != nil {
		t.Fatal(rerr)
	}
	return reps, err
}
