// Package testproc starts the processes of tests so that none outlives the
// test binary, and gives a test binary a temporary directory that goes
// with it.
//
// A process started through Command or CommandContext
//
//   - leads a process group of its own, so that what it starts itself
//     (chromium's helpers, the compiler under `go build`) can be killed with
//     it;
//   - on Linux, gets SIGKILL when the test binary dies (a parent-death
//     signal), whatever the death: a failed test, the panic of -timeout,
//     SIGKILL;
//   - has its group killed in the cleanup of the test that made it, after
//     the test's own cleanups (which may stop it gracefully) ran;
//   - on Linux, has its group killed by the reaper, a shell the package
//     starts once per test binary, waiting for the end of a pipe from the
//     test binary: the kernel closes the pipe however the test binary
//     ends, and the reaper then kills every group still registered and
//     removes the directory of Main. That covers what a parent-death
//     signal does not: the children of a child.
//
// Main, called from a package's TestMain, points TMPDIR at a directory of
// its own for the run (t.TempDir, os.MkdirTemp and the children all create
// their folders there) and removes it at the end; the reaper removes it
// when the test binary did not live to.
//
// Command's cmd must be started with its own methods (Start, Run, Output,
// CombinedOutput), not those of the embedded exec.Cmd.
package testproc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"
)

// Cmd is an exec.Cmd whose Start puts the process in its own process
// group, tied to the test binary's life and to tb's (see the package doc).
type Cmd struct {
	*exec.Cmd
	tb testing.TB
}

// Command is exec.Command for a test: the process's group is killed when
// tb ends, and when the test binary ends, however it ends.
func Command(tb testing.TB, name string, args ...string) *Cmd {
	tb.Helper()
	return wrap(tb, exec.Command(name, args...))
}

// CommandContext is exec.CommandContext for a test (see Command). When ctx
// is done, the process's whole group is killed.
func CommandContext(tb testing.TB, ctx context.Context, name string, args ...string) *Cmd {
	tb.Helper()
	c := wrap(tb, exec.CommandContext(ctx, name, args...))
	c.Cancel = func() error { return killGroup(c.Process.Pid) }
	return c
}

func wrap(tb testing.TB, cmd *exec.Cmd) *Cmd {
	c := &Cmd{Cmd: cmd, tb: tb}
	c.SysProcAttr = sysProcAttr()
	tb.Cleanup(func() {
		// Registered first, this runs after the test's own cleanups,
		// which may have stopped the process gracefully; the group may
		// hold more than the process.
		if c.Process == nil {
			return
		}
		killGroup(c.Process.Pid)
		reaper.forget(c.Process.Pid)
	})
	return c
}

// Start starts c (see Command).
func (c *Cmd) Start() error { return Start(c.Cmd) }

// Start starts cmd, made outside any test (a broker a TestMain shares
// between the tests of a package), as Cmd.Start does but with no test's
// cleanup: the caller stops it; when the test binary dies first, the
// kernel and the reaper do. cmd.SysProcAttr is replaced.
func Start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = sysProcAttr()
	var err error
	onStarterThread(func() { err = cmd.Start() })
	if err == nil {
		reaper.watch(cmd.Process.Pid)
	}
	return err
}

// Run starts c and waits for it to exit.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs c and returns its standard output, as exec.Cmd.Output does
// (an *exec.ExitError holds the standard error when Stderr is nil).
func (c *Cmd) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("testproc: Stdout already set")
	}
	var stdout, stderr bytes.Buffer
	c.Stdout = &stdout
	captureErr := c.Stderr == nil
	if captureErr {
		c.Stderr = &stderr
	}
	err := c.Run()
	var ee *exec.ExitError
	if captureErr && errors.As(err, &ee) {
		ee.Stderr = stderr.Bytes()
	}
	return stdout.Bytes(), err
}

// CombinedOutput runs c and returns its standard output and standard error
// together.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	if c.Stdout != nil || c.Stderr != nil {
		return nil, errors.New("testproc: Stdout or Stderr already set")
	}
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	return b.Bytes(), err
}

// starter runs the functions of onStarterThread on one goroutine locked to
// its OS thread, which it never unlocks and never leaves. Linux sends a
// child its parent-death signal when the *thread* that forked it exits,
// not the process (prctl(2), PR_SET_PDEATHSIG); the Go runtime ends a
// thread when a goroutine locked to it returns, so a child forked from an
// arbitrary goroutine could be killed while its test runs. This thread
// lives as long as the test binary.
var starter struct {
	once sync.Once
	fns  chan func()
}

func onStarterThread(f func()) {
	starter.once.Do(func() {
		starter.fns = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range starter.fns {
				f()
			}
		}()
	})
	done := make(chan struct{})
	starter.fns <- func() { defer close(done); f() }
	<-done
}

// Main runs m with TMPDIR set to a new directory, removes the directory
// and exits with m's code; a package's TestMain calls it:
//
//	func TestMain(m *testing.M) { testproc.Main(m) }
//
// When the test binary dies before (the panic of -timeout, a signal), the
// reaper removes the directory. before, if not nil, runs after m and
// before the directory is removed.
func Main(m *testing.M, before ...func()) {
	dir, err := os.MkdirTemp("", "streamlearn-test-")
	if err != nil {
		panic("testproc: " + err.Error())
	}
	reaper.start(dir)
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	for _, f := range before {
		f()
	}
	os.RemoveAll(dir)
	reaper.stop()
	os.Exit(code)
}
