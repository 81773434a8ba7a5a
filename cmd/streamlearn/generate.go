package main

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
)

// The synthetic stream: v and w uniform on [0,1], label 1 exactly when
// v >= threshold, with no v closer than gap to the threshold. It is
// realizable by thresholds on v (any grid with a point in
// (threshold-gap, threshold+gap]) and linearly separable with a bias, so
// every learner's realizable-case bound must hold on it; --noise flips
// labels to show regret and bound violations.
const (
	genThreshold = 0.37
	genGap       = 0.01
)

func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("generate", generateArgs, stderr)
	n := fs.Int("n", 5000, "number of events")
	seed := fs.Uint64("seed", 1, "random seed: equal seeds give equal files")
	noise := fs.Float64("noise", 0, "probability of flipping each label")
	unlabeled := fs.Float64("unlabeled", 0, "probability of leaving an event unlabeled")
	delay := fs.Int("delay", 0, "send each label as a label event {\"id\",\"key\",\"label\"} a uniform 0..2`D` events after its event (mean D), for labels.delayed; 0: labels inline")
	never := fs.Float64("never", 0, "with --delay: probability that an event's label is never sent")
	out := fs.String("o", "-", "output `file` (- for standard output)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *n < 0 || *noise < 0 || *noise > 1 || *unlabeled < 0 || *unlabeled > 1 || *delay < 0 || *never < 0 || *never > 1 {
		return usageErr(fs, "-n and --delay must be >= 0, --noise, --unlabeled and --never in [0,1]")
	}
	if *never > 0 && *delay == 0 {
		return usageErr(fs, "--never needs --delay")
	}
	o, err := createWholeOutput(*out, stdout)
	if err != nil {
		return err
	}
	defer o.Close()
	if err := generate(ctx, o, genOptions{n: *n, seed: *seed, noise: *noise, unlabeled: *unlabeled, delay: *delay, never: *never}); err != nil {
		return err
	}
	return o.Commit()
}

const generateArgs = "[-n N] [--seed S] [--noise P] [--unlabeled P] [--delay D [--never P]] [-o FILE]"

// genOptions are generate's settings.
type genOptions struct {
	n                       int
	seed                    uint64
	noise, unlabeled, never float64
	delay                   int
}

// generate writes the synthetic stream. With a delay, each labeled event
// is written without its label, keyed by its id (so that its label lands
// on its partition), and its label comes as a label event a uniform
// 0..2·delay events later, or never with probability never. The events,
// their features and labels are those of the same seed without a delay:
// the delays come from a generator of their own.
func generate(ctx context.Context, w io.Writer, o genOptions) error {
	rng := rand.New(rand.NewPCG(o.seed, 0x5eed))
	delays := rand.New(rand.NewPCG(o.seed, 0xde1a))
	var due labelQueue
	var buf []byte
	write := func() error {
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		return nil
	}
	flush := func(upTo int) error {
		if err := due.writeDue(w, upTo); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		return nil
	}
	for i := range o.n {
		if i&0xfff == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		v := rng.Float64()
		for v > genThreshold-genGap && v < genThreshold+genGap {
			v = rng.Float64()
		}
		x := rng.Float64()
		label := 0
		if v >= genThreshold {
			label = 1
		}
		if rng.Float64() < o.noise {
			label = 1 - label
		}
		labeled := rng.Float64() >= o.unlabeled
		buf = append(buf[:0], `{"id":"e-`...)
		buf = strconv.AppendInt(buf, int64(i+1), 10)
		if o.delay > 0 {
			buf = append(buf, `","key":"e-`...)
			buf = strconv.AppendInt(buf, int64(i+1), 10)
		}
		buf = append(buf, `","features":{"v":`...)
		buf = strconv.AppendFloat(buf, v, 'f', 4, 64)
		buf = append(buf, `,"w":`...)
		buf = strconv.AppendFloat(buf, x, 'f', 4, 64)
		buf = append(buf, '}')
		if labeled && o.delay == 0 {
			buf = append(buf, `,"label":`...)
			buf = strconv.AppendInt(buf, int64(label), 10)
		}
		buf = append(buf, "}\n"...)
		if err := write(); err != nil {
			return err
		}
		if labeled && o.delay > 0 {
			d, lost := delays.IntN(2*o.delay+1), delays.Float64() < o.never
			if !lost {
				id := "e-" + strconv.Itoa(i+1)
				due.add(dueLabel{at: i + d, seq: i, id: id, key: id, label: label})
			}
		}
		if err := flush(i); err != nil {
			return err
		}
	}
	if err := due.writeAll(w); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	return nil
}

// dueLabel is a label event to write once the record at index at is
// written; seq orders labels due at once by their records.
type dueLabel struct {
	at, seq int
	id, key string
	label   int // 1 or 0
}

// dueLabels is a min-heap of labels by (at, seq).
type dueLabels []dueLabel

func (h dueLabels) Len() int { return len(h) }
func (h dueLabels) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h dueLabels) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueLabels) Push(x any)   { *h = append(*h, x.(dueLabel)) }
func (h *dueLabels) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// labelQueue holds the label events of a stream of messages now and
// labels later (generate --delay, delay) until they are due. Each is
// written as {"id","key","label"}: the label event that labels.delayed
// joins by id to the waiting event, keyed as its event so that both land
// on one partition.
type labelQueue struct {
	h   dueLabels
	buf []byte
}

// add queues l.
func (q *labelQueue) add(l dueLabel) { heap.Push(&q.h, l) }

// writeDue writes to w, in order, the label events due once the record at
// index upTo is written.
func (q *labelQueue) writeDue(w io.Writer, upTo int) error {
	for len(q.h) > 0 && q.h[0].at <= upTo {
		l := heap.Pop(&q.h).(dueLabel)
		q.buf = append(q.buf[:0], `{"id":`...)
		q.buf = appendJSONString(q.buf, l.id)
		q.buf = append(q.buf, `,"key":`...)
		q.buf = appendJSONString(q.buf, l.key)
		q.buf = append(q.buf, `,"label":`...)
		q.buf = strconv.AppendInt(q.buf, int64(l.label), 10)
		q.buf = append(q.buf, "}\n"...)
		if _, err := w.Write(q.buf); err != nil {
			return err
		}
	}
	return nil
}

// writeAll writes every label event still queued.
func (q *labelQueue) writeAll(w io.Writer) error { return q.writeDue(w, math.MaxInt) }
