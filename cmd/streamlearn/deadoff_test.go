package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayDeadLettersOff: --dead-letters off and /dev/null discard the
// bad records, the config's dead-letter file included, and say so; the
// config's file, when used, is named as the config's; a path that is not
// a regular file fails once, pointing at off, with the command's name
// once ("streamlearn replay: --dead-letters: …").
func TestReplayDeadLettersOff(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"features":{"v":1},"label":"maybe"}`+"\n"+`{"features":{"v":1},"label":1}`+"\n"+`{"features":{"v":1},"label":"x"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "live-dead.jsonl")
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("learners: [{name: p, algorithm: perceptron}]\nsinks:\n  dead_letters: {kind: file, path: "+live+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, off := range []string{"off", os.DevNull} {
		code, out, errOut := run(t, "replay", "-c", cfg, "--dead-letters", off, in)
		want := "2 of 3 records rejected: label 2 (dead letters discarded: --dead-letters " + off + ")\n"
		if code != 0 || out == "" || !strings.Contains(errOut, want) {
			t.Errorf("--dead-letters %s: exit %d, stderr %q; want 0, a report and %q", off, code, errOut, want)
		}
		if _, err := os.Lstat(live); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--dead-letters %s: the config's dead-letter file: %v, want none written", off, err)
		}
	}

	code, _, errOut := run(t, "replay", "-c", cfg, in)
	want := "(dead letters: " + live + ", the config's sinks.dead_letters; --dead-letters off discards them)"
	if code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("replay -c with sinks.dead_letters: exit %d, stderr %q; want 0 and %q", code, errOut, want)
	}
	if b, err := os.ReadFile(live); err != nil || strings.Count(string(b), "\n") != 2 {
		t.Errorf("the config's dead-letter file: %q, %v; want the 2 bad records", b, err)
	}

	code, out, errOut := run(t, "replay", "--dead-letters", dir, in)
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "streamlearn replay: --dead-letters: file sink "+dir+": not a regular file") || !strings.Contains(errOut, "(--dead-letters off discards bad records)") {
		t.Errorf("--dead-letters on a folder: exit %d, stdout %q, stderr %q; want 1, no report, one line pointing at off", code, out, errOut)
	}
}
