//go:build !linux

package testproc

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(pid int) error {
	if p, err := os.FindProcess(pid); err == nil {
		return p.Kill()
	}
	return nil
}

// reaper does nothing outside Linux: the processes end in the cleanups of
// their tests.
var reaper reaperProc

type reaperProc struct{}

func (reaperProc) start(string) {}
func (reaperProc) watch(int)    {}
func (reaperProc) forget(int)   {}
func (reaperProc) stop()        {}
