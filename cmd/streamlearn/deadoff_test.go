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

// TestConfigDeadLettersOff: sinks.dead_letters: off discards the bad
// records in replay and run, each saying so once (run at start, in its
// log), and check shows it; a scalar other than off is refused, pointing
// at it.
func TestConfigDeadLettersOff(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"features":{"v":1},"label":"maybe"}`+"\n"+`{"features":{"v":1},"label":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("learners: [{name: p, algorithm: perceptron}]\nsource: {kind: file, path: "+in+"}\nsinks:\n  dead_letters: off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "replay", "-c", cfg, in)
	if want := "1 of 2 records rejected: label 1 (dead letters discarded: the config's sinks.dead_letters: off)\n"; code != 0 || out == "" || !strings.HasSuffix(errOut, want) {
		t.Errorf("replay: exit %d, stderr %q; want 0, a report and %q", code, errOut, want)
	}
	code, out, errOut = run(t, "run", "-c", cfg, "--until-end", "--http", "off")
	if n := strings.Count(errOut, "dead letters are discarded (sinks.dead_letters: off)"); code != 0 || out == "" || n != 1 ||
		!strings.Contains(errOut, "1 of 2 records rejected: label 1 (dead letters discarded: sinks.dead_letters: off)") {
		t.Errorf("run: exit %d, stderr %q; want 0, a report, the discarding said once at start and with the rejected records", code, errOut)
	}
	code, out, errOut = run(t, "check", "-c", cfg)
	if want := "\ndead letters:  off: discarded, counted by reason in the report (sinks.dead_letters: off)\n"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("check: exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d files in the folder, want the input and the config: nothing written", len(entries))
	}
	if err := os.WriteFile(cfg, []byte("learners: [{name: p, algorithm: perceptron}]\nsinks:\n  dead_letters: none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(t, "check", "-c", cfg)
	if want := cfg + ":3: sinks.dead_letters: want a mapping of keys, a sink's kind and where it writes: {kind: file, path: FILE}, or a broker's, or off to discard them\n"; code != 1 || !strings.HasSuffix(errOut, want) {
		t.Errorf("check of dead_letters: none: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
}
