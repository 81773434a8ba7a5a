package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// check describes models per key: by key, the bound on the resident
// models and the keys' index (half of models.max_bytes), where the others
// are spilled, idle eviction, the global model, the warm start, what the
// models and a key's place in the index cost, how many keys fill the
// half alone, and the soft memory limit (max_bytes + X).
func TestCheckModelsPerKey(t *testing.T) {
	dir := t.TempDir()
	spill := filepath.Join(dir, "spill") // check wants it to be a directory
	if err := os.Mkdir(spill, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		models string
		want   []string
	}{
		{"{by: key, max: 40, idle: 90s, global: true, spill_dir: " + spill + "}", []string{
			"models:        one per event key within each partition (models.by: key)",
			"resident:    512.0 MiB a partition for the models per key (models.max_bytes): the resident models with the index of every key seen are kept within half of it, 256.0 MiB, the other half being the collector's room, and at most 40 models resident (models.max); past it the least recently used, and any not used for 1m30s (models.idle), is spilled to a file in " + spill + " (models.spill_dir)",
			// 190 bytes, a name of 16, 2 mistakes in 16 and 2 mix counts in 64
			"every key seen, resident or spilled, takes about 286 bytes of it",
			"past about 938585 keys seen a partition their index alone fills it: only the model in use stays resident",
			"global:      a global model per partition beside them (models.global)",
			"warm start:  none: each new key's model starts empty",
			"plus the global model: one more model per partition",
		}},
		{"{by: key}", []string{
			"512.0 MiB a partition for the models per key (models.max_bytes): the resident models with the index of every key seen are kept within half of it, 256.0 MiB, the other half being the collector's room; past it the least recently used is spilled to a file in the system's temporary directory",
			"global:      none (models.global false): each key is served by its own model",
			// 190 bytes, a name of 16, 2 mistakes in 16: 256 MiB / 222
			"every key seen, resident or spilled, takes about 222 bytes of it",
			"past about 1209168 keys seen a partition their index alone fills it",
			"process:     run and replay set a soft memory limit of models.max_bytes a partition + 112.0 MiB, 624.0 MiB with one partition, which holds RSS within models.max_bytes a partition + 128.0 MiB (the rest of the process, 16.0 MiB of it pages the limit does not count); GOMEMLIMIT replaces it",
		}},
	} {
		cfg := filepath.Join(dir, "keyed.yaml")
		if err := os.WriteFile(cfg, []byte("features: {bits: 12}\nlearners: [{name: p, algorithm: perceptron}, {name: a, algorithm: adagrad, loss: hinge}]\nmodels: "+tc.models+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := run(t, "check", "-c", cfg)
		if code != 0 {
			t.Fatalf("check %s: exit %d: %s", tc.models, code, errOut)
		}
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("check %s: no %q in\n%s", tc.models, want, out)
			}
		}
		if strings.Contains(out, "one model per partition") {
			t.Errorf("check %s says one model per partition:\n%s", tc.models, out)
		}
		// What a key's model costs new and per feature (its footprint:
		// at least each feature's index and weights, 8 bytes the
		// Perceptron's and 32 AdaGrad's), and how many new ones the
		// bound's half for the live models holds.
		m := regexp.MustCompile(`each key's model costs about ` + size + ` new, plus about ([0-9]+) bytes a feature its key touched`).FindStringSubmatch(out)
		r := regexp.MustCompile(`256.0 MiB holds about ([0-9]+) new models`).FindStringSubmatch(out)
		if m == nil || r == nil {
			t.Fatalf("check %s: no memory of a key's model in\n%s", tc.models, out)
		}
		if b, _ := strconv.Atoi(m[3]); b < 44 || b > 200 {
			t.Errorf("check %s: %d bytes a feature, want the 40 of its weights, its index, and at most their doubling's slack", tc.models, b)
		}
		oneLo, oneHi := sizeRange(t, m[1], m[2])
		n, _ := strconv.ParseFloat(r[1], 64)
		if n*oneLo > 256<<20 || 256<<20 > (n+1)*oneHi {
			t.Errorf("check %s: 256 MiB holds %v models of %s %s", tc.models, n, m[1], m[2])
		}
	}
}

// size matches a size as check prints it: a number and its unit.
const size = `([0-9.]+) (bytes|KiB|MiB|GiB)`

// sizeRange returns the bytes a size as check prints it may stand for:
// the number give or take half its last digit.
func sizeRange(t *testing.T, num, unit string) (lo, hi float64) {
	t.Helper()
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		t.Fatal(err)
	}
	half := 0.5
	if _, frac, ok := strings.Cut(num, "."); ok {
		half /= math.Pow(10, float64(len(frac)))
	}
	u := map[string]float64{"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
	return (v - half) * u, (v + half) * u
}

// check prints sizes in the unit that reads: bytes below a KiB, GiB from
// one up (the resident models per key of a large configuration).
func TestMib(t *testing.T) {
	for _, tc := range []struct {
		b    uint64
		want string
	}{{512, "512 bytes"}, {126 << 10, "126 KiB"}, {8 << 20, "8.0 MiB"}, {10000 * 8235 << 10, "78.5 GiB"}} {
		if got := mib(tc.b); got != tc.want {
			t.Errorf("mib(%d) = %q, want %q", tc.b, got, tc.want)
		}
	}
}

// check says the bound that applies to each learner's parameters: none
// for an averaged Perceptron (a margin is refused with averaging), the
// mistake bound with a margin, the certificate without; AdaGrad's regret
// bound only when it is not normalized; OGD's against the zero vector, the
// one its report checks, for its schedule and radius.
func TestCheckBoundOfParams(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bounds.yaml")
	if err := os.WriteFile(cfg, []byte("learners:\n  - {name: avg, algorithm: perceptron, average: true}\n  - {name: m, algorithm: perceptron, margin: 0.1}\n  - {name: p, algorithm: perceptron}\n  - {name: nag, algorithm: adagrad}\n  - {name: plain, algorithm: adagrad, normalized: false}\n"+
		"  - {name: sqrt, algorithm: ogd}\n  - {name: fixed, algorithm: ogd, schedule: fixed}\n  - {name: ball, algorithm: ogd, radius: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "check", "-c", cfg)
	if code != 0 {
		t.Fatalf("check: exit %d: %s", code, errOut)
	}
	for name, want := range map[string]string{
		"avg":   "no mistake bound: the average predicts",
		"m":     "mistakes ≤ (R/γ)² with γ = 0.1, assumed",
		"p":     "the margin certificate R/√M: every unit separator",
		"nag":   "none checked: the normalized step",
		"plain": "regret against the zero vector ≤",
		"sqrt":  "regret against the zero vector ≤ D²·√T/(2η) + η·G²·(√T − ½) with η/√t, D the largest ‖w‖ so far",
		"fixed": "regret against the zero vector ≤ η·G²·T/2,",
		"ball":  "regret against the zero vector ≤ B²·√T/(2η) + η·G²·(√T − ½) with η/√t and radius B",
	} {
		line := regexp.MustCompile(`(?m)^  ` + name + ` +(perceptron|adagrad|ogd) +(.*)$`).FindStringSubmatch(out)
		if line == nil || !strings.HasPrefix(line[2], want) {
			t.Errorf("learner %s: %q, want it to begin %q\n%s", name, line, want, out)
		}
	}
}

// A models.spill_dir that is not a directory is named, by check and by
// a replay, with what to do.
func TestSpillDirMissing(t *testing.T) {
	dir := t.TempDir()
	cfg, in := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(cfg, []byte("learners: [{name: p, algorithm: perceptron}]\nmodels: {by: key, spill_dir: "+filepath.Join(dir, "nowhere")+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, []byte(`{"key":"a","features":{"v":1},"label":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "-c", cfg}, {"replay", "-c", cfg, in}} {
		code, _, errOut := run(t, args...)
		if code != 1 || !strings.Contains(errOut, "models.spill_dir "+filepath.Join(dir, "nowhere")) || !strings.Contains(errOut, "set it to a directory") {
			t.Errorf("%s: exit %d: %s, want exit 1 naming models.spill_dir", args[0], code, errOut)
		}
	}
}

// TestCheckDelayedBounds: with labels: {delayed: true}, check prints each
// learner's bound in the form the tracker checks with labels d rounds
// late, and for a learner whose theorem assumes immediate labels says so
// — as the report of a replay of a delayed stream does (its bound's
// assumes: immediate labels, or its delay_rounds).
func TestCheckDelayedBounds(t *testing.T) {
	t.Parallel() // see parallelTests
	dir := t.TempDir()
	class := "class: {kind: thresholds, feature: v, min: 0, max: 1, points: 9}"
	cfg := filepath.Join(dir, "delayed.yaml")
	if err := os.WriteFile(cfg, []byte("features: {bits: 12}\nlabels: {delayed: true}\nlearners:\n"+
		"  - {name: m, algorithm: perceptron, margin: 0.1}\n  - {name: mb, algorithm: perceptron, margin: 0.1, bias: true}\n"+
		"  - {name: p, algorithm: perceptron}\n  - {name: avg, algorithm: perceptron, average: true}\n"+
		"  - {name: k, algorithm: kernel-perceptron, margin: 0.1}\n  - {name: kb, algorithm: kernel-perceptron, max_support: 50}\n"+
		"  - {name: sqrt, algorithm: ogd}\n  - {name: fixed, algorithm: ogd, schedule: fixed, radius: 2}\n"+
		"  - {name: plain, algorithm: adagrad, normalized: false}\n  - {name: peg, algorithm: pegasos}\n"+
		"  - {name: cons, algorithm: consistent, "+class+"}\n  - {name: halv, algorithm: halving, "+class+"}\n  - {name: soa, algorithm: soa, "+class+"}\n"+
		"  - {name: wm, algorithm: weighted-majority, experts: [m, sqrt]}\n  - {name: maj, algorithm: majority}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "check", "-c", cfg)
	if code != 0 {
		t.Fatalf("check: exit %d: %s", code, errOut)
	}
	const immediate = " — with delayed labels none: its theorem assumes immediate labels; the report marks it assumes: immediate labels"
	lines := map[string]string{}
	for name, want := range map[string]string{
		"m":     "mistakes ≤ (2d+1)·(R/γ)² with γ = 0.1, assumed, labels d rounds late",
		"mb":    "mistakes ≤ (2d+1)·R²·max(1, (1+(ρ−γ)²)/γ²) with γ = 0.1, assumed, labels d rounds late",
		"p":     "the margin certificate R·√((2d+1)/M), labels d rounds late",
		"avg":   "no mistake bound: the average predicts" + "*" + immediate,
		"k":     "mistakes ≤ (2d+1)·R²/γ² with γ = 0.1, labels d rounds late",
		"kb":    "with margin: γ and no budget" + "*" + immediate,
		"sqrt":  "regret against the zero vector ≤ the bound of immediate labels plus a drift of d·η·G²·(d + 2√T), labels d rounds late",
		"fixed": "regret against the zero vector ≤ the bound of immediate labels plus a drift of d·η·G²·T, labels d rounds late*; the certificate ball_regret_bound plus the same drift",
		"plain": "regret against the zero vector ≤*" + immediate,
		"peg":   "*" + immediate,
		"cons":  "mistakes ≤ (d+1)·(|H| − 1) on a stream realizable by H, labels d rounds late",
		"halv":  "mistakes ≤ (d+1)·log₂|H| on a stream realizable by H, labels d rounds late",
		"soa":   "mistakes ≤ (d+1)·Ldim(H) on a stream realizable by H, labels d rounds late",
		"wm":    "expected regret against the best expert ≤ √(2T ln n), n the experts (doubling trick when T is unknown), plus a drift of Σ over epochs of rounds·min(1, d·(1 − e^(−η)))",
		"maj":   "no bound",
	} {
		line := regexp.MustCompile(`(?m)^  ` + name + ` +[a-z-]+ +(.*)$`).FindStringSubmatch(out)
		// want is a prefix, then, after each *, a part that follows.
		ok := line != nil
		if ok {
			lines[name] = line[1]
			rest := line[1]
			for i, part := range strings.Split(want, "*") {
				j := strings.Index(rest, part)
				if j < 0 || i == 0 && j != 0 {
					ok = false
					break
				}
				rest = rest[j+len(part):]
			}
		}
		if !ok {
			t.Errorf("learner %s: %q, want %q\n%s", name, line, want, out)
		}
	}

	// The report of a replay of a delayed stream says the same: assumes
	// immediate labels exactly where check says so, the delay otherwise.
	stream := filepath.Join(dir, "late.jsonl")
	if code, _, errOut := run(t, "delay", "-c", cfg, "--by", "20", "-o", stream, demoHead(t, 400)); code != 0 {
		t.Fatalf("delay --by 20: exit %d: %s", code, errOut)
	}
	r := replayJSON(t, "-c", cfg, stream)
	if len(r.Learners) != len(lines) {
		t.Fatalf("the report has %d learners, check %d", len(r.Learners), len(lines))
	}
	for _, l := range r.Learners {
		says := strings.Contains(lines[l.Name], immediate)
		switch b := l.Bound; {
		case b == nil:
			if lines[l.Name] != "no bound" && !says && !strings.HasPrefix(lines[l.Name], "the margin certificate") {
				t.Errorf("%s: no bound in the report, check says %q", l.Name, lines[l.Name])
			}
		case says != (b.Assumes == "immediate labels") || !says && b.DelayRounds == 0:
			t.Errorf("%s: the report's bound %+v, check says %q", l.Name, *b, lines[l.Name])
		}
	}
}
