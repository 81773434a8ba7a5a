package service

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// countingDir is a Dir that counts its Loads.
type countingDir struct {
	*checkpoint.Dir
	loads atomic.Int64
}

func (d *countingDir) Load(ctx context.Context, p int32) (*checkpoint.Checkpoint, error) {
	d.loads.Add(1)
	return d.Dir.Load(ctx, p)
}

// A serving.Replica following a directory: not ready and no model before a
// checkpoint; the model of the checkpoint once saved, read once however
// often it polls while it does not change, read again when it does; and
// no model once the checkpoint is moved away.
func TestServerFollows(t *testing.T) {
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	values := genEvents(600, 5, 0.05, 0.1, 0)
	dir, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &countingDir{Dir: dir}
	ctx := context.Background()
	s, err := serving.NewReplica(ctx, serving.ServeOptions{Config: c, Checkpoints: store})
	if err != nil {
		t.Fatal(err)
	}
	if snap := s.Snapshot(); snap.Started || len(snap.Reports) != 0 {
		t.Errorf("no checkpoint yet: started %v, %d reports", snap.Started, len(snap.Reports))
	}
	if _, err := s.Predictor(ctx, 0, true, nil); !errors.Is(err, serving.ErrNoModel) {
		t.Errorf("no checkpoint yet: %v", err)
	}

	want, _, err := runStore(t, c, dir, values[:300], 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.loads.Load(); n != 1 {
		t.Errorf("an unchanged checkpoint read %d times, want once", n)
	}
	snap := s.Snapshot()
	if !snap.Started || len(snap.Reports) != 1 {
		t.Fatalf("after a checkpoint: started %v, %d reports", snap.Started, len(snap.Reports))
	}
	sameReport(t, "served", snap.Reports[0].Report, want[0].Report)

	again, _, err := runStore(t, c, dir, values, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	sameReport(t, "after a newer checkpoint", s.Snapshot().Reports[0].Report, again[0].Report)

	if err := os.Rename(dir.File(0), dir.File(0)+".away"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Predictor(ctx, 0, true, nil); !errors.Is(err, serving.ErrNoModel) || s.Snapshot().Started {
		t.Errorf("the checkpoint moved away: still served (%v)", err)
	}
}
