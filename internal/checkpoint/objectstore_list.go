package checkpoint

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// ObjectName returns "partition-N.ckpt", the name of Dir's file and the
// name under which builds before position-named objects kept partition's
// checkpoint object. ObjectStore still reads such an object (see
// ObjectStore) but saves under objectNameAt.
func ObjectName(partition int32) string {
	return "partition-" + strconv.FormatInt(int64(partition), 10) + ".ckpt"
}

// objectNameAt returns the name of partition's checkpoint object of
// position: "partition-N@P.ckpt".
func objectNameAt(partition int32, position int64) string {
	return "partition-" + strconv.FormatInt(int64(partition), 10) + "@" + strconv.FormatInt(position, 10) + ".ckpt"
}

// parseObjectName parses a checkpoint object's name: "partition-N@P.ckpt"
// gives partition N, position P and at true; "partition-N.ckpt" (the name
// ObjectName gives) partition N and at false. N and P are canonical
// decimals (as Dir.Partitions reads file names: no "+", no leading zero,
// no "-0"), N an int32 and P an int64. Any other name gives ok false.
func parseObjectName(name string) (partition int32, position int64, at, ok bool) {
	n, ok := strings.CutPrefix(name, "partition-")
	if !ok {
		return 0, 0, false, false
	}
	if n, ok = strings.CutSuffix(n, ".ckpt"); !ok {
		return 0, 0, false, false
	}
	n, pos, at := strings.Cut(n, "@")
	p, ok := parseDecimal(n, 32)
	if !ok {
		return 0, 0, false, false
	}
	if at {
		if position, ok = parseDecimal(pos, 64); !ok {
			return 0, 0, false, false
		}
	}
	return int32(p), position, at, true
}

// parseDecimal parses s as a canonical decimal integer of bits bits.
func parseDecimal(s string, bits int) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil || strconv.FormatInt(v, 10) != s {
		return 0, false
	}
	return v, true
}

// object is a checkpoint object named in the bucket: a name
// parseObjectName takes.
type object struct {
	name      string
	partition int32
	// position is the one of the name; for a legacy name (ObjectName),
	// the "position" metadata, or math.MinInt64 when there is none (see
	// resolve).
	position int64
	legacy   bool
}

// above reports whether Load prefers o to q: a higher position, or at the
// same one a position-named object over a legacy one.
func (o object) above(q object) bool {
	if o.position != q.position {
		return o.position > q.position
	}
	return !o.legacy && q.legacy
}

// legacyPosition returns the position of a legacy object of meta info:
// its "position" metadata when that is a canonical decimal, else
// math.MinInt64, below any position.
func legacyPosition(info *jetstream.ObjectInfo) int64 {
	if v, ok := parseDecimal(info.Metadata["position"], 64); ok {
		return v
	}
	return math.MinInt64
}

// metaSubject returns the subject of object name's meta messages, the
// Object Store protocol's (ADR-20), as object.go:767 builds it.
func (s *ObjectStore) metaSubject(name string) string {
	return "$O." + s.bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}

// list returns the checkpoint objects named in the bucket, in no order:
// the names of the stream's meta subjects, all in one Stream Info reply
// (an atomic snapshot, where nats.go's List reads the metas through a
// consumer that can wait for its deadline when metas are purged while it
// runs). Objects nats.go's Delete marked deleted are included; the
// position of a legacy name is not known yet (resolve).
func (s *ObjectStore) list(ctx context.Context) ([]object, error) {
	prefix := "$O." + s.bucket + ".M."
	si, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, err
	}
	var out []object
	for subject := range si.State.Subjects {
		enc, ok := strings.CutPrefix(subject, prefix)
		if !ok {
			continue
		}
		raw, err := base64.URLEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		p, pos, at, ok := parseObjectName(string(raw))
		if !ok {
			continue
		}
		out = append(out, object{name: string(raw), partition: p, position: pos, legacy: !at})
	}
	return out, nil
}

// meta returns object name's current meta and its stream sequence, nil
// when there is none (the object was removed).
func (s *ObjectStore) meta(ctx context.Context, name string) (*jetstream.ObjectInfo, uint64, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.metaSubject(name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("meta of %s: %w", name, err)
	}
	var info jetstream.ObjectInfo
	if err := json.Unmarshal(m.Data, &info); err != nil || info.Name != name {
		return nil, 0, fmt.Errorf("%w: meta of %s is not an object's meta", ErrCorrupt, name)
	}
	return &info, m.Sequence, nil
}

// errVanished is the error of resolve when an object listed is gone: a
// Save of a higher position removed it since the list.
var errVanished = errors.New("object removed since listed")

// candidates returns partition's objects among objs, the one Load prefers
// first. The legacy one is resolved: its meta read for its position, and
// left out when deleted; when it is gone, the error is errVanished.
func (s *ObjectStore) candidates(ctx context.Context, objs []object, partition int32) ([]object, error) {
	var out []object
	for _, o := range objs {
		if o.partition != partition {
			continue
		}
		if o.legacy {
			info, _, err := s.meta(ctx, o.name)
			switch {
			case err != nil:
				return nil, err
			case info == nil:
				return nil, errVanished
			case info.Deleted:
				continue
			}
			o.position = legacyPosition(info)
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b object) int {
		switch {
		case a.above(b):
			return -1
		case b.above(a):
			return 1
		}
		return 0
	})
	return out, nil
}

// top returns the first object of cands (as candidates orders them) that
// is not deleted, and false when all are; its meta is read, so when it is
// gone the error is errVanished.
func (s *ObjectStore) top(ctx context.Context, cands []object) (object, bool, error) {
	for _, o := range cands {
		info, _, err := s.meta(ctx, o.name)
		switch {
		case err != nil:
			return object{}, false, err
		case info == nil:
			return object{}, false, errVanished
		case !info.Deleted:
			return o, true, nil
		}
	}
	return object{}, false, nil
}

// prune removes the objects among cands (partition's, as candidates
// returns them) of positions lower than top's (see ObjectStore,
// "Cleanup"), as far as it can: a removal that fails leaves the object
// for a later Save or Load.
func (s *ObjectStore) prune(ctx context.Context, cands []object, top object) {
	for _, o := range cands {
		if o.position < top.position {
			s.remove(ctx, o.name, top.position)
		}
	}
}

// remove removes object name if its current meta is that of a checkpoint
// object (or a delete marker) of a position lower than below: it purges
// that meta message, by sequence, so that a meta stored since stays, then
// the chunks the meta names. Errors are ignored (see prune).
func (s *ObjectStore) remove(ctx context.Context, name string, below int64) {
	_, position, at, ok := parseObjectName(name)
	if !ok {
		return
	}
	info, seq, err := s.meta(ctx, name)
	if err != nil || info == nil {
		return
	}
	if !at {
		position = legacyPosition(info)
	}
	if position >= below {
		return
	}
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.metaSubject(name)), jetstream.WithPurgeSequence(seq+1)); err != nil {
		return
	}
	if !info.Deleted && info.NUID != "" {
		_ = s.stream.Purge(ctx, jetstream.WithPurgeSubject("$O."+s.bucket+".C."+info.NUID))
	}
}

// Partitions lists the partitions with a checkpoint object, each once,
// ascending, ignoring deleted objects and other names. It reads the meta
// of each partition's highest object.
func (s *ObjectStore) Partitions(ctx context.Context) ([]int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	fail := func(err error) ([]int32, error) {
		return nil, fmt.Errorf("checkpoint %s: list: %w", s, s.ctxErr(ctx, bctx, err))
	}
	objs, err := s.list(bctx)
	if err != nil {
		return fail(err)
	}
	var listed []int32
	for _, o := range objs {
		listed = append(listed, o.partition)
	}
	slices.Sort(listed)
	var out []int32
	for _, p := range slices.Compact(listed) {
		cands, err := s.candidates(bctx, objs, p)
		var ok bool
		if err == nil {
			_, ok, err = s.top(bctx, cands)
		}
		switch {
		case errors.Is(err, errVanished):
			// Removed since listed, by a Save of a higher position.
			ok = true
		case err != nil:
			return fail(err)
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// Stamps returns, for each partition that has a checkpoint, the name of
// its object of the highest position and the stream sequence of its meta:
// a Save puts an object of another name, or the same name again under a
// new meta. It lists the bucket once and reads a meta or two per
// partition, not the objects.
func (s *ObjectStore) Stamps(ctx context.Context) (map[int32]string, error) {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	for tries := 1; ; tries++ {
		out, err := s.stamps(bctx)
		switch {
		case errors.Is(err, errVanished) && tries < objectVanishedLoads:
			continue
		case err != nil:
			return nil, fmt.Errorf("checkpoint %s: stamps: %w", s, s.ctxErr(ctx, bctx, err))
		}
		return out, nil
	}
}

// stamps is one attempt of Stamps; errVanished when an object listed was
// removed meanwhile.
func (s *ObjectStore) stamps(ctx context.Context) (map[int32]string, error) {
	objs, err := s.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	parts := map[int32]bool{}
	for _, o := range objs {
		parts[o.partition] = true
	}
	out := make(map[int32]string, len(parts))
	for p := range parts {
		cands, err := s.candidates(ctx, objs, p)
		if err != nil {
			return nil, err
		}
		top, ok, err := s.top(ctx, cands)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		info, seq, err := s.meta(ctx, top.name)
		if err != nil {
			return nil, err
		}
		if info == nil {
			return nil, errVanished
		}
		out[p] = fmt.Sprintf("%s %d", top.name, seq)
	}
	return out, nil
}

var _ Stamper = (*ObjectStore)(nil)
