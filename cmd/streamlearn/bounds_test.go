package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayBoundStatus: the report says each bound's status, in JSON and
// in text. The stream is v = 1 with labels −1, +1, −1, ... (see
// TestPerceptronPremise): the thresholds on v all say +1 at v = 1, so the
// version spaces of consistent, halving and soa empty on round 1 (premise
// false); the Perceptron's margin 0.5 is assumed until round 2, whose
// update cancels the first (w = −1 + 1 = 0 < M·γ = 1: no unit separator
// has margin 0.5), while its mistakes stay within the bound R²/γ² = 4;
// OGD's and Hedge's theorems are unconditional (holds).
func TestReplayBoundStatus(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte(`learners:
  - {name: pct, algorithm: perceptron, margin: 0.5}
  - {name: ogd, algorithm: ogd}
  - {name: consistent, algorithm: consistent, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 11}}
  - {name: halving, algorithm: halving, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 11}}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 11}}
  - {name: wm, algorithm: weighted-majority, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 11}, seed: 1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rounds int
		pct    string // the Perceptron's status
	}{{1, "assumed"}, {2, "premise_false"}, {7, "premise_false"}} {
		var lines strings.Builder
		for k := range tc.rounds {
			fmt.Fprintf(&lines, `{"features":{"v":1},"label":%d}`+"\n", k%2) // 0 is −1
		}
		in := filepath.Join(dir, fmt.Sprintf("s%d.jsonl", tc.rounds))
		if err := os.WriteFile(in, []byte(lines.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"pct": tc.pct, "ogd": "holds", "consistent": "premise_false", "halving": "premise_false",
			"soa": "premise_false", "wm": "holds"}
		code, out, errOut := run(t, "replay", "--report", "json", "-c", cfg, in)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		// The report's JSON as a client reads it.
		var r struct {
			Learners []struct {
				Name     string
				Mistakes uint64
				Bound    *struct {
					Holds  bool
					Status string
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		for _, l := range r.Learners {
			if l.Bound == nil {
				t.Fatalf("%d rounds: %s has no bound", tc.rounds, l.Name)
			}
			if s := string(l.Bound.Status); s != want[l.Name] {
				t.Errorf("%d rounds: %s: status %s, want %s (%+v)", tc.rounds, l.Name, s, want[l.Name], *l.Bound)
			}
			// holds: only whether the quantity is within the bound.
			if l.Name == "pct" && (!l.Bound.Holds || l.Mistakes != uint64(tc.rounds/2)) {
				t.Errorf("%d rounds: pct: holds %v with %d mistakes ≤ 4", tc.rounds, l.Bound.Holds, l.Mistakes)
			}
		}
		code, out, errOut = run(t, "replay", "-c", cfg, in)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || want[f[0]] == "" {
				continue
			}
			text := strings.ReplaceAll(want[f[0]], "_", " ")
			if !strings.Contains(line, " "+text+" ") {
				t.Errorf("%d rounds: %q does not say %q", tc.rounds, line, text)
			}
			if text != "holds" && strings.Contains(line, " holds ") {
				t.Errorf("%d rounds: %q says holds", tc.rounds, line)
			}
		}
	}
}
