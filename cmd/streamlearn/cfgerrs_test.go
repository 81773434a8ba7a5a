package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryConfigError: check, replay and run print every error of a
// configuration at once, one a line, sorted by line, each with the
// command's name, and exit 1 without reading anything.
func TestEveryConfigError(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfg, []byte("features: {bits: 40}\nlearners:\n  - {name: p, algorithm: perceptorn, eta: 1}\nsinks:\n  reports: {kind: file, paht: r.jsonl}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{
		cfg + ":1: features.bits: 40 is outside 1..24",
		cfg + `:3: learners[0].algorithm: "perceptorn" is not one of `,
		cfg + ":5: sinks.reports.paht: unknown key: did you mean path? (a file sink's keys: every, interval, kind, path)",
	}
	for _, args := range [][]string{{"check", "-c", cfg}, {"replay", "-c", cfg, cfg}, {"run", "-c", cfg, "--until-end"}} {
		code, out, errOut := run(t, args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		ok := code == 1 && out == "" && len(lines) == len(want)
		for i := 0; ok && i < len(want); i++ {
			ok = strings.HasPrefix(lines[i], "streamlearn "+args[0]+": "+want[i])
		}
		if !ok {
			t.Errorf("%s: exit %d, stdout %q, stderr:\n%s\nwant exit 1, nothing on stdout and these lines, in order:\n%s", args[0], code, out, errOut, strings.Join(want, "\n"))
		}
	}
}
