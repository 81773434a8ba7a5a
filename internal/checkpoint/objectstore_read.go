package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// errChunkGone is the error of a chunk that the object's meta counts but
// the stream no longer holds.
var errChunkGone = errors.New("chunk gone")

// errDeleted is the error of read for an object nats.go's Delete marked
// deleted (`nats object rm`, say): no checkpoint.
var errDeleted = errors.New("object deleted")

// read returns the bytes of object name, verified against its meta
// (size, SHA-256 digest), starting over when its chunks vanish (see
// objectReplacedReads). An object without a meta is an error wrapping
// fs.ErrNotExist, a deleted one errDeleted.
func (s *ObjectStore) read(ctx context.Context, name string) ([]byte, error) {
	var gone string // NUID of the object whose chunks vanished last
	wait := 10 * time.Millisecond
	for replaced, lost := 0, 0; ; {
		info, err := s.obs.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("load: %w (%w)", fs.ErrNotExist, err)
		}
		if err != nil {
			return nil, fmt.Errorf("load: meta: %w", err)
		}
		if info.Deleted {
			return nil, errDeleted
		}
		switch {
		case gone == "":
		case info.NUID == gone:
			if lost++; lost == objectLostReads {
				return nil, fmt.Errorf("%w: %d chunks named by the object's meta are gone (a Save that failed after storing its meta?)", ErrCorrupt, info.Chunks)
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			wait *= 2
		default:
			if replaced++; replaced == objectReplacedReads {
				return nil, fmt.Errorf("load: %w %d times", errReplaced, replaced)
			}
		}
		b, err := s.readChunks(ctx, info)
		if !errors.Is(err, errChunkGone) {
			return b, err
		}
		gone = info.NUID
	}
}

// readChunks reads the chunks info names, in stream order, each by a
// direct get of the next message on their subject.
func (s *ObjectStore) readChunks(ctx context.Context, info *jetstream.ObjectInfo) ([]byte, error) {
	if info.Opts != nil && info.Opts.Link != nil {
		return nil, fmt.Errorf("%w: a link to %s/%s, not a checkpoint", ErrCorrupt, info.Opts.Link.Bucket, info.Opts.Link.Name)
	}
	if info.Size > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrCorrupt, info.Size, MaxSize)
	}
	want, err := jetstream.DecodeObjectDigest(info.Digest)
	if err != nil && info.Size > 0 {
		return nil, fmt.Errorf("%w: object digest %q: %v", ErrCorrupt, info.Digest, err)
	}
	subject := "$O." + s.bucket + ".C." + info.NUID
	b := make([]byte, 0, info.Size)
	seq := uint64(1)
	for i := range info.Chunks {
		m, err := s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("%w: %d of %d", errChunkGone, i+1, info.Chunks)
		}
		if err != nil {
			return nil, fmt.Errorf("load: chunk %d of %d: %w", i+1, info.Chunks, err)
		}
		if uint64(len(b)+len(m.Data)) > info.Size {
			return nil, fmt.Errorf("%w: chunks longer than the object's %d bytes", ErrCorrupt, info.Size)
		}
		b = append(b, m.Data...)
		seq = m.Sequence + 1
	}
	if uint64(len(b)) != info.Size {
		return nil, fmt.Errorf("%w: %d bytes in %d chunks, the object has %d", ErrCorrupt, len(b), info.Chunks, info.Size)
	}
	if info.Size > 0 {
		if sum := sha256.Sum256(b); !bytes.Equal(sum[:], want) {
			return nil, fmt.Errorf("%w: object digest mismatch", ErrCorrupt)
		}
	}
	return b, nil
}
