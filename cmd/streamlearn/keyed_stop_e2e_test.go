package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EKeyedSIGTERM: `run` learning a skewed stream of 60,000 events
// over up to 20,000 keys (writeKeyedStream) with a model per key, at most
// 2,000 of them in memory, from a file with checkpoints, gets SIGTERM
// after its first checkpoint. It exits 0; it read no more of the file
// after the signal than a read in flight (the records in its final
// checkpoint all start within what it had read at the signal, plus 1
// MiB); and a run resumed from that checkpoint to the end reports every
// key's model — events, each learner's rounds, mistakes, loss and state
// digest — as an uninterrupted run does.
func TestE2EKeyedSIGTERM(t *testing.T) {
	sl, _ := e2eBuild(t)
	ctx, dir := e2eStart(t, 2*e2eTimeout)
	stream := filepath.Join(dir, "keyed.jsonl")
	st, err := writeKeyedStream(stream, keyedStream{Events: 60000, Keys: 20000, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	config := func(name, ckpt string) string {
		path := filepath.Join(dir, name)
		yaml := fmt.Sprintf(`features: {bits: 10}
learners:
  - {name: perceptron, algorithm: perceptron, bias: true}
  - {name: adagrad, algorithm: adagrad, bias: true, normalized: false}
models: {by: key, max: 2000}
source: {kind: file, path: %q}
checkpoint: {dir: %q, every: 5000}
`, stream, ckpt)
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	want := keyLines(t, "uninterrupted run", runProc(t, ctx, dir, sl, "run", "-c", config("whole.yaml", filepath.Join(dir, "whole")), "--until-end", "--report", "json", "--http", "off"))
	if len(want) != st.Keys {
		t.Fatalf("uninterrupted run: %d keys reported, the stream has %d", len(want), st.Keys)
	}

	ckpt := filepath.Join(dir, "state")
	cfg := config("stopped.yaml", ckpt)
	p, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--http", "off")
	for {
		if _, err := os.Stat(filepath.Join(ckpt, "partition-0.ckpt")); err == nil {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("run ended before its first checkpoint: %v\n%s", p.err, p.stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	// Stopped while its position is read, so that SIGTERM comes exactly
	// there.
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	read := readPos(t, p.cmd.Process.Pid, stream)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGCONT} {
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	p.waitExit(t, ctx)
	if p.err != nil {
		t.Fatalf("run stopped by SIGTERM: %v, want exit 0\n%s", p.err, p.stderr.String())
	}
	cps := inspectCheckpoints(t, ctx, dir, sl, ckpt)
	if len(cps) != 1 {
		t.Fatalf("%d checkpoints, want 1", len(cps))
	}
	learned := cps[0].Position + 1 // offsets are line numbers
	// What the loop may read while the signal reaches it, about 5,000
	// records: far less than the file.
	const slack = 1 << 20
	canRead := int64(bytes.Count(data[:min(int(read)+slack, len(data))], []byte("\n")))
	t.Logf("SIGTERM after %d bytes read (%d lines); the final checkpoint holds %d records of %d", read, canRead, learned, st.Events)
	if learned > canRead {
		t.Errorf("the final checkpoint holds %d records: the run read on after SIGTERM (%d lines within what it had read, plus 1 MiB)", learned, canRead)
	}
	if learned >= int64(st.Events) {
		t.Fatalf("the final checkpoint holds every record (%d): the signal came after the end, nothing tested", learned)
	}

	got := keyLines(t, "run resumed after SIGTERM", runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off"))
	if len(got) != len(want) {
		t.Errorf("resumed run: %d keys reported, want %d", len(got), len(want))
	}
	diffs := 0
	for key, w := range want {
		if g := got[key]; g != w && diffs < 5 {
			diffs++
			t.Errorf("key %s after the resume:\n got: %s\nwant: %s", key, g, w)
		}
	}
}

// keyLines returns each key's report of `run --report json`'s lines: its
// events and each learner's rounds, mistakes, loss and state digest.
func keyLines(t *testing.T, what string, out []byte) map[string]string {
	t.Helper()
	lines := map[string]string{}
	for _, r := range keyReports(t, what, out) {
		s := []string{"events=" + strconv.FormatUint(r.Events, 10)}
		for _, l := range r.Learners {
			s = append(s, learnerLine(l.Name, l.Rounds, l.Mistakes, l.Loss, l.StateSHA256))
		}
		lines[*r.Key] = strings.Join(s, "; ")
	}
	return lines
}

// readPos returns how far process pid has read the file at path: the
// position of the descriptor it has open on it (/proc/PID/fdinfo).
func readPos(t *testing.T, pid int, path string) int64 {
	t.Helper()
	path, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err != nil || l != path {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "pos:"); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
	}
	t.Fatalf("process %d has no descriptor open on %s", pid, path)
	return 0
}
