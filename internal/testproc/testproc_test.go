package testproc_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// TestOutput: Output and CombinedOutput keep the contract of os/exec's.
func TestOutput(t *testing.T) {
	sh := lookSh(t)
	out, err := testproc.Command(t, sh, "-c", "echo out; echo err >&2; exit 3").Output()
	var ee *exec.ExitError
	if string(out) != "out\n" || !errors.As(err, &ee) || ee.ExitCode() != 3 || string(ee.Stderr) != "err\n" {
		t.Errorf("Output: %q, %v; want \"out\\n\" and exit 3 with stderr \"err\\n\"", out, err)
	}
	out, err = testproc.Command(t, sh, "-c", "echo out; echo err >&2").CombinedOutput()
	if string(out) != "out\nerr\n" || err != nil {
		t.Errorf("CombinedOutput: %q, %v; want \"out\\nerr\\n\"", out, err)
	}
	if dir := os.Getenv("TMPDIR"); !strings.Contains(dir, "streamlearn-test-") {
		t.Errorf("TMPDIR %q: want the folder of Main", dir)
	}
}

// TestGroupEndsWithTest: the cleanup of a test kills the group of the
// processes it started, a child's children included.
func TestGroupEndsWithTest(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process groups of tests and /proc: Linux only")
	}
	sh := lookSh(t)
	var pids []int
	t.Run("start", func(t *testing.T) {
		pids = startSleeps(t, sh)
	})
	waitGone(t, pids, "the end of the test that started them")
}

// TestNothingLeftAfterKill: a test binary that started a shell with a
// child of its own leaves neither, nor any folder, when it is SIGKILLed or
// panics as -timeout makes it.
func TestNothingLeftAfterKill(t *testing.T) {
	if end := os.Getenv("TESTPROC_HELPER"); end != "" {
		pids := startSleeps(t, lookSh(t))
		os.MkdirAll(t.TempDir()+"/a/folder", 0o755)
		fmt.Printf("pids %d %d\n", pids[0], pids[1])
		if end == "panic" {
			go panic("testproc: the panic of a test that ran out of time")
		}
		select {}
	}
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signal and reaper: Linux only")
	}
	for _, end := range []string{"sigkill", "panic"} {
		t.Run(end, func(t *testing.T) {
			tmp := t.TempDir()
			cmd := testproc.Command(t, os.Args[0], "-test.run=^TestNothingLeftAfterKill$")
			cmd.Env = append(os.Environ(), "TESTPROC_HELPER="+end, "TMPDIR="+tmp)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			var pids [2]int
			if _, err := fmt.Sscanf(line, "pids %d %d", &pids[0], &pids[1]); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the helper said %q", line)
			}
			if end == "sigkill" {
				cmd.Process.Kill()
			}
			cmd.Wait()
			waitGone(t, pids[:], "a "+end+" of the test binary")
			deadline := time.Now().Add(30 * time.Second)
			for {
				entries, _ := os.ReadDir(tmp)
				if len(entries) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d entries (%s...) left in TMPDIR after a %s", len(entries), entries[0].Name(), end)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func lookSh(t *testing.T) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	return sh
}

// startSleeps starts sh with a sleep of its own and returns both pids.
func startSleeps(t *testing.T, sh string) []int {
	t.Helper()
	cmd := testproc.Command(t, sh, "-c", "sleep 600 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	line, _ := bufio.NewReader(out).ReadString('\n')
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("sh said %q", line)
	}
	return []int{cmd.Process.Pid, child}
}

// waitGone waits until no process of pids runs (a zombie has ended),
// failing t after 30s: a bound on correctness, not a speed claim.
func waitGone(t *testing.T, pids []int, after string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				break
			}
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("pid %d still runs after %s", pid, after)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
