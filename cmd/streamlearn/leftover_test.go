package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/testproc"
)

// leftoverEnv, set, makes TestNothingLeftBehind the helper it runs: the
// value says how the helper's test binary ends.
const leftoverEnv = "STREAMLEARN_LEFTOVER_HELPER"

// TestNothingLeftBehind: a test binary that started a kfake broker
// process, a nats-server, a streamlearn run and a shell with a child of
// its own leaves none of them running and no folder in its temporary
// directory, whether it passes, dies in a panic as -timeout makes it, or
// is SIGKILLed. (The binary is this one, run again as the helper.)
func TestNothingLeftBehind(t *testing.T) {
	if os.Getenv(leftoverEnv) != "" {
		leftoverHelper(t)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signal, reaper and /proc: Linux only")
	}
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	sl, kfake := e2eBuild(t)
	for _, end := range []string{"pass", "panic", "sigkill"} {
		t.Run(end, func(t *testing.T) {
			tmp, pidDir := t.TempDir(), t.TempDir()
			pidsFile := filepath.Join(pidDir, "pids")
			cmd := testproc.Command(t, os.Args[0], "-test.run=^TestNothingLeftBehind$", "-test.v")
			cmd.Env = append(os.Environ(), leftoverEnv+"="+end, "TMPDIR="+tmp,
				"LEFTOVER_PIDS="+pidsFile, "LEFTOVER_STREAMLEARN="+sl, "LEFTOVER_KFAKE="+kfake, "LEFTOVER_NATS="+natsBin)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			goOn, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var said bytes.Buffer
			ready := false
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				said.WriteString(sc.Text() + "\n")
				if sc.Text() == "leftover: ready" {
					ready = true
					break
				}
			}
			if !ready {
				cmd.Wait()
				t.Fatalf("the helper ended before it started its processes:\n%s%s", said.Bytes(), stderr.Bytes())
			}
			// The pids are written before "ready": read them while the
			// processes surely live, with their start times (a pid
			// reused later is not ours).
			data, err := os.ReadFile(pidsFile)
			if err != nil {
				t.Fatal(err)
			}
			type started struct {
				name  string
				pid   int
				start string
			}
			var procs []started
			for line := range strings.Lines(string(data)) {
				name, p, _ := strings.Cut(strings.TrimSpace(line), " ")
				pid, err := strconv.Atoi(p)
				if err != nil {
					t.Fatalf("%s: %q", pidsFile, line)
				}
				st, ok := procStat(pid)
				if !ok {
					t.Fatalf("%s (pid %d) is not running before the helper ends", name, pid)
				}
				procs = append(procs, started{name, pid, st.start})
			}
			if len(procs) != 5 {
				t.Fatalf("%s lists %d processes, want kfake, nats-server, streamlearn, sh and sleep:\n%s", pidsFile, len(procs), data)
			}
			if end == "sigkill" {
				cmd.Process.Kill()
			}
			goOn.Close() // the helper ends
			go func() {
				for sc.Scan() {
					said.WriteString(sc.Text() + "\n")
				}
			}()
			err = cmd.Wait()
			t.Logf("the helper ended (%s): %v", end, err)
			if (end == "pass") != (err == nil) {
				t.Errorf("helper ending %s: %v, want an error exactly when it does not pass\n%s", end, err, stderr.Bytes())
			}

			// A bound on correctness, not a speed claim: a killed
			// process is gone in milliseconds, the reaper's rm -rf too.
			deadline := time.Now().Add(30 * time.Second)
			for _, p := range procs {
				for {
					st, ok := procStat(p.pid)
					if !ok || st.start != p.start || st.state == "Z" {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s (pid %d, state %s) still runs after the test binary ended (%s)", p.name, p.pid, st.state, end)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			// Nothing else in their process groups either.
			for _, p := range procs {
				if left := groupMembers(p.pid); len(left) != 0 {
					t.Errorf("the process group of %s (%d) still holds %v", p.name, p.pid, left)
				}
			}
			for {
				entries, err := os.ReadDir(tmp)
				if err != nil {
					t.Fatal(err)
				}
				if len(entries) == 0 {
					break
				}
				if time.Now().After(deadline) {
					var names []string
					for _, e := range entries {
						names = append(names, e.Name())
					}
					t.Errorf("the test binary left %v in its TMPDIR (%s)", names, end)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// leftoverHelper starts the processes of TestNothingLeftBehind, writes
// their pids, says "leftover: ready" and, at the end of its standard
// input, ends as $STREAMLEARN_LEFTOVER_HELPER says.
func leftoverHelper(t *testing.T) {
	sl, kfake, natsBin := os.Getenv("LEFTOVER_STREAMLEARN"), os.Getenv("LEFTOVER_KFAKE"), os.Getenv("LEFTOVER_NATS")
	ctx, dir := e2eStart(t, 5*time.Minute)
	var pids bytes.Buffer
	broker, bootstrap := startKfakeProc(t, ctx, dir, kfake, 1)
	fmt.Fprintf(&pids, "kfake %d\n", broker.cmd.Process.Pid)
	srv, _, _ := natsServerFree(t, ctx, natsBin, dir)
	fmt.Fprintf(&pids, "nats-server %d\n", srv.cmd.Process.Pid)
	cfg := e2eConfig(t, dir, "run.yaml", fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: leftover}\n", bootstrap))
	run, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--http", "off")
	fmt.Fprintf(&pids, "streamlearn %d\n", run.cmd.Process.Pid)
	// A child of a child: no parent-death signal reaches it, its
	// process group does.
	sh, sleepPid := start(t, ctx, dir, true, "/bin/sh", "-c", `sleep 600 & echo $!; wait`)
	line, err := bufio.NewReader(sleepPid).ReadString('\n')
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	fmt.Fprintf(&pids, "sh %d\nsleep %s", sh.cmd.Process.Pid, line)
	if err := os.WriteFile(os.Getenv("LEFTOVER_PIDS"), pids.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(t.TempDir(), "a", "folder"), 0o755)
	fmt.Println("leftover: ready")
	io.Copy(io.Discard, os.Stdin)
	switch os.Getenv(leftoverEnv) {
	case "pass":
	case "panic":
		// What -timeout does: a panic on another goroutine, no cleanup.
		go panic("leftover: the panic of a test that ran out of time")
		select {}
	default:
		t.Fatal("leftover: not killed")
	}
}

// procStatus is what TestNothingLeftBehind reads of /proc/PID/stat.
type procStatus struct {
	state, pgrp, start string
}

// procStat reads /proc/pid/stat; false when there is no such process.
func procStat(pid int) (procStatus, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStatus{}, false
	}
	// pid (comm) state ppid pgrp ... starttime is field 22; comm may
	// hold spaces and parentheses, so split after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStatus{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return procStatus{}, false
	}
	return procStatus{state: f[0], pgrp: f[2], start: f[19]}, true
}

// groupMembers lists the live (not zombie) processes of process group
// pgrp.
func groupMembers(pgrp int) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.pgrp == strconv.Itoa(pgrp) && st.state != "Z" {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			out = append(out, fmt.Sprintf("%d %s", pid, bytes.TrimSpace(comm)))
		}
	}
	return out
}
