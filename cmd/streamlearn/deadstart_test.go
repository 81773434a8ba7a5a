package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayDeadLettersAtStart: replay opens its dead-letter file at start,
// even one that does not exist yet, so that a path it cannot write (a
// folder that does not exist) stops it before its first record, exit 1,
// with no report; a file it made and wrote no dead letter to is removed
// at its end, with the lock file it made, and one that existed stays.
// (Before, a file that did not exist was opened at the first dead letter
// only: a replay without one never found out, one with one stopped after
// the learning.)
func TestReplayDeadLettersAtStart(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	if err := os.WriteFile(good, []byte("{\"features\":{\"v\":0.5},\"label\":1}\n{\"features\":{\"v\":0.1},\"label\":0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "no-such-folder", "dead.jsonl")
	code, out, errOut := run(t, "replay", "--dead-letters", missing, good)
	if want := "replay: --dead-letters: file sink " + missing + ": "; code != 1 || out != "" || !strings.Contains(errOut, want) || !strings.Contains(errOut, "its folder "+filepath.Dir(missing)+" does not exist") {
		t.Errorf("replay with its dead letters in a missing folder: exit %d, stdout %q, stderr %q; want exit 1, no report, and %q", code, out, errOut, want)
	}

	dead := filepath.Join(dir, "dead.jsonl")
	if code, _, errOut := run(t, "replay", "--dead-letters", dead, good); code != 0 {
		t.Fatalf("replay without bad records: exit %d: %s", code, errOut)
	}
	for _, f := range []string{dead, filepath.Join(dir, ".dead.jsonl.lock")} {
		if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s made by a replay without bad records: %v, want it removed", f, err)
		}
	}
	if err := os.WriteFile(dead, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "replay", "--dead-letters", dead, good); code != 0 {
		t.Fatalf("replay without bad records: exit %d: %s", code, errOut)
	}
	if st, err := os.Stat(dead); err != nil || st.Size() != 0 {
		t.Errorf("an empty dead-letter file that was there before the replay: %v, want it kept", err)
	}
}
