package service

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
)

// A service with a warm start has its trained model from the start, before
// any record comes: it reports it and serves it; and a warm start that
// cannot be read stops only a partition that needs a new model.
func TestWarmStartIdle(t *testing.T) {
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	values := genEvents(500, 5, 0.05, 0.1, 0)
	warm, trained := warmStartOf(t, c, values)
	want, err := trained.Reports()
	if err != nil {
		t.Fatal(err)
	}

	s := newService(t, Options{Config: c, Source: newMemSource(nil, 1), WarmStart: warm})
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	reps, err := s.Reports()
	if err != nil || len(reps) != 1 {
		t.Fatalf("an idle service with a warm start: %d models, %v", len(reps), err)
	}
	if w := reps[0].WarmStart; w == nil || w.SHA256 != hex.EncodeToString(warm.SHA256[:]) || w.Events != 500 {
		t.Errorf("warm start %+v", w)
	}
	reps[0].WarmStart = nil
	sameReport(t, "idle, warm", reps[0].Report, want[0].Report)

	// The file unreadable: a partition with a checkpoint runs, one
	// without stops the service, naming the file's error.
	store, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runStore(t, c, store, values[:100], 1, 0); err != nil {
		t.Fatal(err)
	}
	broken := &WarmStart{Path: "gone.slm", Err: context.DeadlineExceeded}
	ok := newService(t, Options{Config: c, Source: newMemSource(values[:200], 1), Checkpoints: store, WarmStart: broken})
	if err := ok.Run(context.Background()); err != nil {
		t.Errorf("a partition with its checkpoint, beside an unreadable warm start: %v", err)
	}
	fresh, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bad := newService(t, Options{Config: c, Source: newMemSource(values[:10], 1), Checkpoints: fresh, WarmStart: broken})
	if err := bad.Run(context.Background()); err == nil || err.Error() != "service: partition 0 has no checkpoint, and its model cannot start from the warm start: context deadline exceeded" {
		t.Errorf("a new partition beside an unreadable warm start: %v", err)
	}
}
