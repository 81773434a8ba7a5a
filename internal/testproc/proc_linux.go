package testproc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills the process group led by pid.
func killGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	return syscall.Kill(-pid, syscall.SIGKILL)
}

// reaperScript reads lines "+PGID" (kill this group at the end) and
// "-PGID" (forget it) until end of input, which comes when the test binary
// ends however it ends; it then kills the groups it was told of and not
// told to forget, and removes the directory $1 (when not empty).
const reaperScript = `trap '' HUP INT TERM QUIT
live=
while IFS= read -r line; do
	case $line in
	+*) live="$live ${line#+}" ;;
	-*) next=; for g in $live; do [ "$g" = "${line#-}" ] || next="$next $g"; done; live=$next ;;
	esac
done
for g in $live; do kill -9 -"$g" 2>/dev/null; done
[ -z "$1" ] || rm -rf -- "$1"
`

// reaper is the test binary's reaper process (see the package doc).
var reaper reaperProc

type reaperProc struct {
	mu    sync.Mutex
	cmd   *exec.Cmd
	w     io.WriteCloser
	tried bool
}

// start starts the reaper once, with dir to remove; start("") on the first
// process of a test binary without Main.
func (r *reaperProc) start(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startLocked(dir)
}

func (r *reaperProc) startLocked(dir string) {
	if r.tried {
		return
	}
	r.tried = true
	sh, err := exec.LookPath("sh")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testproc: no sh for the reaper:", err)
		return
	}
	cmd := exec.Command(sh, "-c", reaperScript, "testproc-reaper", dir)
	// Its own group, so that a ^C to the test binary's does not kill it
	// before it has done its work; no parent-death signal; no standard
	// output or error, which go test would wait for.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testproc: reaper:", err)
		return
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testproc: reaper:", err)
		return
	}
	r.cmd, r.w = cmd, w
}

func (r *reaperProc) send(op byte, pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startLocked("")
	if r.w != nil {
		fmt.Fprintf(r.w, "%c%d\n", op, pid)
	}
}

func (r *reaperProc) watch(pgid int)  { r.send('+', pgid) }
func (r *reaperProc) forget(pgid int) { r.send('-', pgid) }

// stop ends the reaper's input and waits for it to do its work and exit.
func (r *reaperProc) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return
	}
	r.w.Close()
	r.cmd.Wait()
	r.w = nil
}
