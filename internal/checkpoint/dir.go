package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A Store keeps one checkpoint per partition. Save is durable when it
// returns: after a crash of the process or the machine, Load returns
// either the previous checkpoint or the new one, whole.
//
// A Save never puts a checkpoint over one of a higher position with the
// same fingerprint and source. The state at a position is a function of
// the partition's records up to it, so the highest position is always
// right; but a process that lost the partition in a rebalance while its
// Save was in flight (paused, say) can finish that Save after the new
// owner saved further, and if it replaced the newer checkpoint, the
// records between the two would be missing from the model while the
// group's commit says they were learned. Such a Save returns nil: what
// it would store is already durable, or something past it.
type Store interface {
	// Save replaces the checkpoint of c.Partition, unless the stored one
	// is of a higher position (see Store).
	Save(ctx context.Context, c *Checkpoint) error
	// Load returns the checkpoint of partition, or an error wrapping
	// fs.ErrNotExist when there is none.
	Load(ctx context.Context, partition int32) (*Checkpoint, error)
	// Partitions lists the partitions that have a checkpoint, ascending.
	Partitions(ctx context.Context) ([]int32, error)
	// Discard moves partition's checkpoints aside, where no Load finds
	// them and nothing removes them, and says where: what an operator's
	// reset of the partition's model leaves behind, for inspection. It
	// does nothing, and returns "", when there is none.
	Discard(ctx context.Context, partition int32) (string, error)
	// String names the store in logs and errors.
	String() string
}

// droppedSuffix names a checkpoint moved aside by Discard at t.
func droppedSuffix(t time.Time) string {
	return ".dropped-" + t.UTC().Format("20060102T150405.000000000Z")
}

// Dir is a Store in a local directory: one file per partition,
// "partition-N.ckpt", each replaced atomically (written to a temporary
// file in the same directory, fsynced, renamed over the old one, and the
// directory fsynced so that the rename itself is durable).
//
// Saves of one partition take an exclusive flock(2) on
// ".partition-N.lock" beside the file, compare the stored checkpoint's
// position (read from the head of the file, and the whole file verified
// when it is the higher) and only then rename: several processes sharing
// the directory cannot put an older checkpoint over a newer one. Lock
// files stay. On systems without flock (Windows) the lock orders the
// Saves of one process only.
type Dir struct {
	path string
}

var _ Store = (*Dir)(nil)

// OpenDir returns the Store in path, creating the directory (mode 0750)
// when it does not exist. It checks at once that the directory is
// writable, so that a bad path fails at start rather than at the first
// checkpoint.
func OpenDir(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("checkpoint: empty directory path")
	}
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	f, err := os.CreateTemp(path, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: directory %s is not writable: %w", path, err)
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	d := &Dir{path: path}
	d.removeTemps()
	return d, nil
}

// removeTemps removes the temporary files of Saves a crash interrupted
// (".partition-N.ckpt.tmp-*"), each only while its partition's lock is
// free: a Save in progress, of another process sharing the directory,
// holds it. What cannot be removed stays for the next start.
func (d *Dir) removeTemps() {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return
	}
	done, cancel := context.WithCancel(context.Background())
	cancel() // one try at each lock, no wait
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), ".partition-")
		if !ok {
			continue
		}
		n, _, ok := strings.Cut(rest, ".ckpt.tmp-")
		if !ok {
			continue
		}
		p, err := strconv.ParseInt(n, 10, 32)
		if err != nil {
			continue
		}
		unlock, err := lockFile(done, d.lockFile(int32(p)))
		if err != nil {
			continue
		}
		os.Remove(filepath.Join(d.path, e.Name()))
		unlock()
	}
}

// OpenDirReadOnly returns the Store in an existing directory path without
// creating or probing it, for reading (streamlearn inspect).
func OpenDirReadOnly(path string) (*Dir, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("checkpoint: %s is not a directory", path)
	}
	return &Dir{path: path}, nil
}

// String returns "dir:PATH".
func (d *Dir) String() string { return "dir:" + d.path }

// File returns the path of partition's checkpoint file.
func (d *Dir) File(partition int32) string {
	return filepath.Join(d.path, "partition-"+strconv.FormatInt(int64(partition), 10)+".ckpt")
}

// Save writes c atomically and durably (see Dir), unless the stored
// checkpoint of c.Partition is of a higher position (see Store). On any
// error the previous checkpoint is left in place and the temporary file
// removed.
func (d *Dir) Save(ctx context.Context, c *Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := c.MarshalBinary()
	if err != nil {
		return err
	}
	unlock, err := lockFile(ctx, d.lockFile(c.Partition))
	if err != nil {
		return fmt.Errorf("checkpoint %s partition %d: lock: %w", d, c.Partition, err)
	}
	defer unlock()
	path := d.File(c.Partition)
	if newer, err := storedPast(path, c); err != nil {
		return fmt.Errorf("checkpoint %s partition %d: %w", d, c.Partition, err)
	} else if newer {
		return nil
	}
	if err := writeFileAtomic(path, b); err != nil {
		return fmt.Errorf("checkpoint %s partition %d: %w", d, c.Partition, err)
	}
	return nil
}

// Discard renames partition's file to "partition-N.ckpt.dropped-TIME"
// (see Store), under the partition's lock.
func (d *Dir) Discard(ctx context.Context, partition int32) (string, error) {
	unlock, err := lockFile(ctx, d.lockFile(partition))
	if err != nil {
		return "", fmt.Errorf("checkpoint %s partition %d: lock: %w", d, partition, err)
	}
	defer unlock()
	path := d.File(partition)
	to := path + droppedSuffix(time.Now())
	if err := os.Rename(path, to); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", fmt.Errorf("checkpoint %s partition %d: discard: %w", d, partition, err)
	}
	if err := syncDir(d.path); err != nil {
		return "", fmt.Errorf("checkpoint %s partition %d: discard: %w", d, partition, err)
	}
	return to, nil
}

// lockFile returns the path of the lock file of partition's Saves.
func (d *Dir) lockFile(partition int32) string {
	return filepath.Join(d.path, ".partition-"+strconv.FormatInt(int64(partition), 10)+".lock")
}

// storedPast reports whether the file at path holds an intact checkpoint
// of c's fingerprint and source and of a position past c's. A missing,
// damaged or foreign file is not past anything (Save replaces it); only
// errors reading the file are errors.
func storedPast(path string, c *Checkpoint) (bool, error) {
	f, err := openRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	head, err := readHead(f)
	f.Close()
	if err != nil || head.Position <= c.Position || head.Fingerprint != c.Fingerprint || head.Source != c.Source || head.Partition != c.Partition {
		return false, nil
	}
	// The head claims a later position: believe it only if the whole
	// file is intact (the rare path: it takes a read of the file), and
	// of the same stream and consumer (a position of another one is no
	// later).
	stored, err := ReadFile(path)
	if err != nil || stored.Origin != "" && c.Origin != "" && stored.Origin != c.Origin ||
		stored.Consumer != "" && c.Consumer != "" && stored.Consumer != c.Consumer {
		return false, nil
	}
	return stored.Position > c.Position, nil
}

// writeFileAtomic replaces path with data: temp file, fsync, rename, fsync
// of the directory.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory, making a rename in it durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Load reads and verifies partition's checkpoint.
func (d *Dir) Load(ctx context.Context, partition int32) (*Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ReadFile(d.File(partition))
}

// Partitions lists the partitions with a checkpoint file.
func (d *Dir) Partitions(ctx context.Context) ([]int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var out []int32
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "partition-")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		n, ok = strings.CutSuffix(n, ".ckpt")
		if !ok {
			continue
		}
		p, err := strconv.ParseInt(n, 10, 32)
		if err != nil || strconv.FormatInt(p, 10) != n {
			continue
		}
		out = append(out, int32(p))
	}
	slices.Sort(out)
	return out, nil
}

// ReadFile reads and verifies the checkpoint file at path. A missing file
// is an error wrapping fs.ErrNotExist; a damaged one wraps ErrCorrupt.
func ReadFile(path string) (*Checkpoint, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("checkpoint %s: not a regular file", path)
	}
	if st.Size() > MaxSize {
		return nil, fmt.Errorf("checkpoint %s: %w: %d bytes, more than the %d allowed", path, ErrCorrupt, st.Size(), MaxSize)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var c Checkpoint
	if err := c.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return &c, nil
}

// openRegular opens path for reading if it is a regular file (after
// symbolic links): a FIFO or a device at a checkpoint's path would block
// the open, or feed it without end, and is refused before it is opened.
func openRegular(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	return os.Open(path)
}

// IsNotExist reports whether err says there is no checkpoint.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// Stamps returns, for each partition's file, its size, modification time
// and identity, and the position and time its header says: a Save puts a
// new file in place (renamed over the old one), of another position or
// time, so a new checkpoint has another stamp even where the file system
// reuses the inode and keeps coarse times. It reads each file's header,
// not the file.
func (d *Dir) Stamps(ctx context.Context) (map[int32]string, error) {
	parts, err := d.Partitions(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]string, len(parts))
	for _, p := range parts {
		f, err := openRegular(d.File(p))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since listed
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s partition %d: %w", d, p, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("checkpoint %s partition %d: %w", d, p, err)
		}
		stamp := fmt.Sprintf("%d %d %v", st.Size(), st.ModTime().UnixNano(), fileID(st))
		if c, err := readHead(f); err == nil {
			stamp += fmt.Sprintf(" %d %d", c.Position, c.Created.UnixNano())
		} // else damaged: Load says how
		f.Close()
		out[p] = stamp
	}
	return out, nil
}

var _ Stamper = (*Dir)(nil)
