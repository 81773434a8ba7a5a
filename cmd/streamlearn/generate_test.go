package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

// generate --delay writes the events of the same seed without a delay,
// each keyed by its id and without its label, and each label as a label
// event 0..2D events after its event, or never (--never); the features and
// labels are the undelayed stream's.
func TestGenerateDelayed(t *testing.T) {
	const n, delay = 4000, 50
	var plain, delayed bytes.Buffer
	if err := generate(context.Background(), &plain, genOptions{n: n, seed: 4}); err != nil {
		t.Fatal(err)
	}
	if err := generate(context.Background(), &delayed, genOptions{n: n, seed: 4, delay: delay, never: 0.25}); err != nil {
		t.Fatal(err)
	}
	type rec struct {
		ID       string             `json:"id"`
		Key      string             `json:"key"`
		Features map[string]float64 `json:"features"`
		Label    *int               `json:"label"`
	}
	want := map[string]rec{}
	for line := range bytes.Lines(plain.Bytes()) {
		var r rec
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		want[r.ID] = r
	}
	arrived := map[string]int{} // id → arrivals before it, itself included
	arrivals, labels := 0, 0
	for line := range bytes.Lines(delayed.Bytes()) {
		var r rec
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		w, ok := want[r.ID]
		if !ok || r.Key != r.ID {
			t.Fatalf("record %s: unknown id or key %q", line, r.Key)
		}
		if r.Features != nil {
			arrivals++
			arrived[r.ID] = arrivals
			if r.Label != nil || len(r.Features) != len(w.Features) || r.Features["v"] != w.Features["v"] || r.Features["w"] != w.Features["w"] {
				t.Fatalf("event %s: %+v, want the undelayed one's features and no label", r.ID, r)
			}
			continue
		}
		labels++
		at, ok := arrived[r.ID]
		switch {
		case !ok:
			t.Fatalf("label of %s before its event", r.ID)
		case r.Label == nil || *r.Label != *w.Label:
			t.Fatalf("label of %s: %v, want %d", r.ID, r.Label, *w.Label)
		case arrivals-at > 2*delay:
			t.Fatalf("label of %s %d events after it, want at most %d", r.ID, arrivals-at, 2*delay)
		}
		arrived[r.ID] = -1 << 30 // a second label would be caught above
	}
	if arrivals != n || labels < n*7/10 || labels > n*8/10 {
		t.Errorf("%d events, %d labels: want %d events and about 75%% labeled", arrivals, labels, n)
	}
}
