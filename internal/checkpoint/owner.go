package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// An Owner is a Store that keeps one process's models apart from
// another's: a process owns a partition's checkpoints while its model of
// the partition lives, and no other process can own them meanwhile. Two
// processes learning one partition at once (two runs on one JetStream
// durable, which the server splits the messages between) would each save
// a model that missed the other's records, under positions that say it
// did not.
type Owner interface {
	// Own takes the ownership of partition's checkpoints for holder (a
	// line naming the process, shown to the next one that asks), waiting
	// while another holds them until ctx is done; then it returns a
	// *HeldError naming that holder. release gives the ownership back;
	// the death of the process gives it back too.
	Own(ctx context.Context, partition int32, holder string) (release func(), err error)
}

// HeldError is the error of an Own that waited in vain: another process
// owns the partition's checkpoints.
type HeldError struct {
	Store     string // the Store's String
	Partition int32
	Holder    string // what the holder said of itself; empty when unknown
	Waited    time.Duration
}

func (e *HeldError) Error() string {
	holder := e.Holder
	if holder == "" {
		holder = "another process"
	}
	return fmt.Sprintf("checkpoint %s partition %d: owned by %s (waited %v)", e.Store, e.Partition, holder, e.Waited.Round(time.Millisecond))
}

// Holder returns the line a process names itself with: its pid, host and
// start.
func Holder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown host"
	}
	return "pid " + strconv.Itoa(os.Getpid()) + " on " + host + " since " + processStart.Format(time.RFC3339)
}

var processStart = time.Now()

// ownFile returns the path of partition's ownership file.
func (d *Dir) ownFile(partition int32) string {
	return filepath.Join(d.path, ".partition-"+strconv.FormatInt(int64(partition), 10)+".owner")
}

// Own takes an exclusive flock(2) on ".partition-N.owner" beside the
// checkpoint and writes holder into it, for the next one to read (see
// Owner). A symbolic link there is never followed: it is an error, as is
// anything else than a regular file with one link. The kernel releases the lock when the process dies, so a crash
// leaves nothing to clean up; a paused process (SIGSTOP, a frozen VM) keeps
// it until it resumes or dies.
func (d *Dir) Own(ctx context.Context, partition int32, holder string) (release func(), err error) {
	path := d.ownFile(partition)
	start := time.Now()
	f, err := lockOwner(ctx, path)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			b, _ := os.ReadFile(path)
			return nil, &HeldError{Store: d.String(), Partition: partition, Holder: firstLine(b), Waited: time.Since(start)}
		}
		return nil, fmt.Errorf("checkpoint %s partition %d: owning: %w", d, partition, err)
	}
	// A name for the next one (the lock is what counts): written over what
	// is there, then cut to its length, so that a reader never finds it
	// empty meanwhile.
	line := []byte(holder + "\n")
	if _, err := f.WriteAt(line, 0); err == nil {
		_ = f.Truncate(int64(len(line)))
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = f.Truncate(0)
			unlockOwner(f, path)
		})
	}, nil
}

// firstLine returns b up to its first newline, at most 200 bytes.
func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' {
			b = b[:i]
			break
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}
