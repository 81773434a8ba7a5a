package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// runReset runs a Service of c with checkpoints in store, the learners
// reset named, over values (all of them from the first), and returns its
// reports, error and log.
func runReset(t *testing.T, c *config.Config, store checkpoint.Store, values [][]byte, reset []string) ([]Report, error, string) {
	t.Helper()
	var logs strings.Builder
	s := newService(t, Options{Config: c, Source: newMemSource(values, 1), Checkpoints: store, CommitEvery: 100,
		ResetLearners: reset, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	err := s.Run(context.Background())
	reps, rerr := s.Reports()
	if rerr != nil {
		t.Fatal(rerr)
	}
	return reps, err, logs.String()
}

// A learner added to the configuration of a checkpointed model: the
// restore stops, naming it and --reset-learner; with it reset, the other
// learners keep their models and go on exactly as in an uninterrupted
// run, the new one learns from the checkpoint on, the checkpoint is
// written again at once for the new configuration, and a restart with the
// same ResetLearners does nothing more.
func TestResetLearners(t *testing.T) {
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	values := genEvents(2000, 5, 0.05, 0.1, 97)
	const cut = 800
	whole, _, err := runStore(t, c, nil, values, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	atCut, _, err := runStore(t, c, nil, values[:cut], 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err, _ := runReset(t, c, store, values[:cut], nil); err != nil {
		t.Fatal(err)
	}

	other := *c
	other.Learners = append(slices.Clone(c.Learners), config.Learner{Name: "extra", Algorithm: "perceptron", Params: &online.PerceptronConfig{Bias: true}})
	_, err, _ = runReset(t, &other, store, values, nil)
	if err == nil || !strings.Contains(err.Error(), "(learner extra (perceptron) added): keep the other learners' models and start these afresh with `run --reset-learner extra`") {
		t.Fatalf("a learner added, none reset: %v", err)
	}
	// Naming a learner that did not change is refused: a name left in a
	// unit file must not reset a model at every restart.
	_, err, _ = runReset(t, &other, store, values, []string{"extra", "pct"})
	if err == nil || !strings.Contains(err.Error(), "pct named to be reset, but the same in the state and the configuration") || !strings.Contains(err.Error(), "--reset-learner extra") {
		t.Fatalf("an unchanged learner reset: %v", err)
	}
	if cp, err := store.Load(context.Background(), 0); err != nil || cp.Fingerprint != Fingerprint(c) {
		t.Fatalf("refused restores changed the checkpoint: %v", err)
	}

	// Reset, with nothing to read: the checkpoint is written at once for
	// the new configuration, at the same position.
	reps, err, logs := runReset(t, &other, store, nil, []string{"extra"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "level=WARN msg=\"learners reset") || !strings.Contains(logs, "added=[extra]") || !strings.Contains(logs, "dropped=[]") {
		t.Errorf("the reset is not logged as a warning naming the learner:\n%s", logs)
	}
	cp, err := store.Load(context.Background(), 0)
	if err != nil || cp.Fingerprint != Fingerprint(&other) || cp.Position != cut-1 {
		t.Fatalf("checkpoint after the reset: %v; fingerprint new %v, position %d", err, cp != nil && cp.Fingerprint == Fingerprint(&other), cp.Position)
	}
	if r := reps[0].Report; r.Events != atCut[0].Events || r.Learners[len(r.Learners)-1].Rounds != 0 {
		t.Errorf("reset: %d events, extra %d rounds; want %d, 0", r.Events, r.Learners[len(r.Learners)-1].Rounds, atCut[0].Events)
	}

	// Restarted with the same flag: nothing to reset; run to the end, the
	// kept learners are the uninterrupted run's.
	reps, err, logs = runReset(t, &other, store, values, []string{"extra"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "nothing to reset") || strings.Contains(logs, "learners reset") {
		t.Errorf("a restart with the same --reset-learner:\n%s", logs)
	}
	got, want := reps[0].Report, whole[0].Report
	extra := got.Learners[len(got.Learners)-1]
	got.Learners = got.Learners[:len(got.Learners)-1]
	sameReport(t, "kept learners", got, want)
	if extra.Name != "extra" || extra.Rounds != want.Labeled-atCut[0].Labeled || extra.Rounds == 0 {
		t.Errorf("extra: %s, %d rounds, want the %d labeled events after the checkpoint", extra.Name, extra.Rounds, want.Labeled-atCut[0].Labeled)
	}
	// Its rounds are exactly those of a fresh pipeline of it over the
	// events after the checkpoint.
	fresh := other
	fresh.Learners = other.Learners[len(other.Learners)-1:]
	ref, _, err := runStore(t, &fresh, nil, values[cut:], 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := ref[0].Learners[0]; r.StateSHA256 != extra.StateSHA256 || r.Mistakes != extra.Mistakes {
		a, _ := json.Marshal(r)
		b, _ := json.Marshal(extra)
		t.Errorf("extra:\n got %s\nwant %s", b, a)
	}

	// Idle restarts, with and without the flag, restore it as it is.
	for _, reset := range [][]string{{"extra"}, nil} {
		again, err, _ := runReset(t, &other, store, nil, reset)
		if err != nil {
			t.Fatal(err)
		}
		sameReport(t, "restarted", again[0].Report, reps[0].Report)
	}
	// The same learners in another order: restored by name, no flag
	// needed, and checkpointed at once for the new order.
	moved := other
	moved.Learners = slices.Concat(other.Learners[len(other.Learners)-1:], other.Learners[:len(other.Learners)-1])
	again, err, logs := runReset(t, &moved, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "the same learners in another order") {
		t.Errorf("reordered learners:\n%s", logs)
	}
	if cp, err := store.Load(context.Background(), 0); err != nil || cp.Fingerprint != Fingerprint(&moved) {
		t.Errorf("reordered learners: the checkpoint is not of the new order (%v)", err)
	}
	for i, l := range reps[0].Learners {
		if g := again[0].Learners[(i+1)%len(reps[0].Learners)]; g.Name != l.Name || g.StateSHA256 != l.StateSHA256 {
			t.Errorf("reordered: learner %s is %s, digest %.12s; want %.12s", l.Name, g.Name, g.StateSHA256, l.StateSHA256)
		}
	}
	// Reordered back, with the flag of the earlier change still in
	// place: nothing to reset, the flag is ignored, not refused.
	back, err, logs := runReset(t, &other, store, nil, []string{"extra"})
	if err != nil {
		t.Fatalf("reordered with a --reset-learner left in place: %v", err)
	}
	if !strings.Contains(logs, "nothing to reset: the checkpoint has the same learners in another order") {
		t.Errorf("reordered with the flag left in place:\n%s", logs)
	}
	sameReport(t, "reordered back", back[0].Report, reps[0].Report)
}

// A partial restore of a checkpoint the broker's commit is past, under
// --rebuild and --accept. Rebuilt, the learners kept are exactly an
// uninterrupted run's and the one added has learned the events after the
// checkpoint; accepted, the model is the checkpoint's (the one added
// fresh) and the events between are not learned.
func TestResetLearnersBehind(t *testing.T) {
	c, _, open, publish := jsRestoreFixture(t, "reset-behind")
	first, second, old := jsBehind(t, c, open, publish, t.TempDir())
	other := *c
	other.Learners = append(slices.Clone(c.Learners), config.Learner{Name: "extra", Algorithm: "perceptron", Params: &online.PerceptronConfig{Bias: true}})
	run := func(d string, on Mismatch) []Report {
		t.Helper()
		store, err := checkpoint.OpenDir(d)
		if err != nil {
			t.Fatal(err)
		}
		s := newService(t, Options{Config: &other, Source: open(), Checkpoints: store, CommitEvery: 100, OnMismatch: on, ResetLearners: []string{"extra"}})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := errors.Join(s.Run(ctx), s.opt.Source.Close()); err != nil {
			t.Fatal(err)
		}
		reps, err := s.Reports()
		if err != nil {
			t.Fatal(err)
		}
		return reps
	}
	split := func(r pipeline.Report) (pipeline.Report, regret.LearnerReport) {
		extra := r.Learners[len(r.Learners)-1]
		r.Learners = r.Learners[:len(r.Learners)-1]
		return r, extra
	}
	for _, tc := range []struct {
		on     Mismatch
		want   []Report
		rounds uint64
	}{
		{MismatchRebuild, second, second[0].Report.Labeled - first[0].Report.Labeled},
		{MismatchAccept, first, 0},
	} {
		d := t.TempDir()
		copyFile(t, old, filepath.Join(d, checkpoint.ObjectName(0)))
		kept, extra := split(run(d, tc.on)[0].Report)
		sameReport(t, fmt.Sprintf("mismatch %d: kept learners", tc.on), kept, tc.want[0].Report)
		if extra.Name != "extra" || extra.Rounds != tc.rounds {
			t.Errorf("mismatch %d: extra has %d rounds, want %d", tc.on, extra.Rounds, tc.rounds)
		}
		// Checkpointed for the new learners at the committed position:
		// the next run, without a flag, restores it as it is.
		cp, err := checkpoint.OpenDir(d)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := cp.Load(context.Background(), 0); err != nil || got.Fingerprint != Fingerprint(&other) || got.Position != 800 {
			t.Fatalf("mismatch %d: checkpoint after: %v", tc.on, err)
		}
	}
}
