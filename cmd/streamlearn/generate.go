package main

import (
	"context"
	"fmt"
	"io"
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
	fs := newFlagSet("generate", "[-n N] [--seed S] [-o FILE]", stderr)
	n := fs.Int("n", 5000, "number of events")
	seed := fs.Uint64("seed", 1, "random seed: equal seeds give equal files")
	noise := fs.Float64("noise", 0, "probability of flipping each label")
	unlabeled := fs.Float64("unlabeled", 0, "probability of leaving an event unlabeled")
	out := fs.String("o", "-", "output `file` (- for standard output)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *n < 0 || *noise < 0 || *noise > 1 || *unlabeled < 0 || *unlabeled > 1 {
		return usageErr(fs, "-n must be >= 0, --noise and --unlabeled in [0,1]")
	}
	o, err := createOutput(*out, stdout)
	if err != nil {
		return err
	}
	defer o.Close()
	if err := generate(ctx, o, *n, *seed, *noise, *unlabeled); err != nil {
		return err
	}
	return o.Close()
}

func generate(ctx context.Context, w io.Writer, n int, seed uint64, noise, unlabeled float64) error {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var buf []byte
	for i := range n {
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
		if rng.Float64() < noise {
			label = 1 - label
		}
		buf = append(buf[:0], `{"id":"e-`...)
		buf = strconv.AppendInt(buf, int64(i+1), 10)
		buf = append(buf, `","features":{"v":`...)
		buf = strconv.AppendFloat(buf, v, 'f', 4, 64)
		buf = append(buf, `,"w":`...)
		buf = strconv.AppendFloat(buf, x, 'f', 4, 64)
		buf = append(buf, '}')
		if rng.Float64() >= unlabeled {
			buf = append(buf, `,"label":`...)
			buf = strconv.AppendInt(buf, int64(label), 10)
		}
		buf = append(buf, "}\n"...)
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
	}
	return nil
}
