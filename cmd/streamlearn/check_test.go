package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// check describes models per key: by key, the bound on the resident
// models, where the others are spilled, idle eviction, the global model,
// the warm start and what the models cost.
func TestCheckModelsPerKey(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		models string
		want   []string
	}{
		{"{by: key, max: 40, idle: 90s, global: true, spill_dir: /var/spill}", []string{
			"models:        one per event key within each partition (models.by: key)",
			"resident:    at most 40 per partition (models.max); past it the least recently used, and any not used for 1m30s (models.idle), is spilled to a file in /var/spill (models.spill_dir)",
			"global:      a global model per partition beside them (models.global)",
			"warm start:  none: each new key's model starts empty",
			"plus the global model: one more model per partition",
		}},
		{"{by: key}", []string{
			"at most 10000 per partition (models.max); past it the least recently used is spilled to a file in the system's temporary directory",
			"global:      none (models.global false): each key is served by its own model",
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
		// What a model costs new, and the resident ones' bound in it.
		m := regexp.MustCompile(`each key's model costs about ([0-9.]+) KiB new, (plus about ([0-9]+) bytes a feature its key touched|and no more as its key touches features)`).FindStringSubmatch(out)
		r := regexp.MustCompile(`at most ([0-9]+) resident per partition: ([0-9.]+) (KiB|MiB) new`).FindStringSubmatch(out)
		if m == nil || r == nil {
			t.Fatalf("check %s: no memory of a key's model in\n%s", tc.models, out)
		}
		one, _ := strconv.ParseFloat(m[1], 64)
		n, _ := strconv.Atoi(r[1])
		all, _ := strconv.ParseFloat(r[2], 64)
		if r[3] == "MiB" {
			all *= 1024
		}
		// Two learners of 2^12 slots: at least their weights, 64 KiB.
		if one < 32 || one > 4096 {
			t.Errorf("check %s: a new key's model costs %v KiB, want its weights' 32 KiB or more (and not megabytes)", tc.models, one)
		}
		if rel := all / (float64(n) * one); rel < 0.9 || rel > 1.1 {
			t.Errorf("check %s: %d resident cost %v KiB, want %d × %v KiB", tc.models, n, all, n, one)
		}
	}
}
