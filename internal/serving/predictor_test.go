package serving

import (
	"errors"
	"testing"
)

// Pick answers the copy of a partition, or the only one; no copy is
// ErrNoModel, and several copies without a partition named is an error
// naming them.
func TestPick(t *testing.T) {
	none := NewCopies(0, false)
	if _, err := none.Pick(0, true, nil); !errors.Is(err, ErrNoModel) {
		t.Errorf("no copy, only: %v, want ErrNoModel", err)
	}
	one := NewCopies(1, false)
	p0 := &Predictor{Partition: 0}
	one.Add(0, p0)
	if pr, err := one.Pick(7, true, nil); err != nil || pr != p0 {
		t.Errorf("one copy, only: %v %v", pr, err)
	}
	two := NewCopies(2, false)
	p3 := &Predictor{Partition: 3}
	two.Add(0, p0)
	two.Add(3, p3)
	if _, err := two.Pick(0, true, nil); err == nil || err.Error() != "2 models (partitions 0, 3): choose one with ?partition=N" {
		t.Errorf("two copies, only: %v", err)
	}
	if pr, err := two.Pick(3, false, nil); err != nil || pr != p3 {
		t.Errorf("partition 3: %v %v", pr, err)
	}
	if _, err := two.Pick(5, false, nil); !errors.Is(err, ErrNoModel) || err.Error() != "no model yet for partition 5" {
		t.Errorf("partition 5: %v", err)
	}
	if pr, ok := two.Of(3); !ok || pr != p3 {
		t.Errorf("Of(3): %v %v", pr, ok)
	}
}
