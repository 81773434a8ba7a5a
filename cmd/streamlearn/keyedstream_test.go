package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
)

// keyedStream describes a skewed keyed stream (writeKeyedStream): Events
// JSON events whose keys are drawn from Keys by a Zipf law of exponent
// 1.1, so a few heavy keys and a long tail (the distinct keys are what
// the draw gives, fewer than Keys when Events is not far above it), and
// Seed makes the same file again.
type keyedStream struct {
	Events, Keys int
	Seed         uint64
}

// Features of every event of a keyedStream: keyedOwn of the key's own
// (named after the key, of weights of its own) and keyedShared drawn from
// a pool of keyedPool shared ones.
const (
	keyedOwn    = 4
	keyedShared = 8
	keyedPool   = 256
	keyedNoise  = 0.1 // the share of labels flipped
	keyedZipfS  = 1.1
)

// keyedStats are what writeKeyedStream wrote: the events, the distinct
// keys and the events of the heaviest key.
type keyedStats struct {
	Events, Keys, Heaviest int
}

// writeKeyedStream writes s to path, one JSON event a line: a key, twelve
// features (keyedOwn of the key's own, keyedShared shared) of values in
// [0, 1), and a label of a noisy linear rule — the sign of the features'
// weighted sum, each feature's weight a function of its name (so a key's
// own features carry a rule of its own), keyedNoise of the labels
// flipped — so that the learners learn something. The same s writes the
// same bytes.
func writeKeyedStream(path string, s keyedStream) (keyedStats, error) {
	f, err := os.Create(path)
	if err != nil {
		return keyedStats{}, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(s.Seed, uint64(s.Events)<<20^uint64(s.Keys)))
	zipf := rand.NewZipf(rng, keyedZipfS, 1, uint64(max(s.Keys, 1)-1))
	shared := make([]float64, keyedPool) // the shared features' weights
	for i := range shared {
		shared[i] = weightOf(s.Seed, uint64(i)<<32)
	}
	counts := make(map[uint64]int)
	var line []byte
	for range s.Events {
		k := zipf.Uint64()
		counts[k]++
		line = append(line[:0], `{"key":"k`...)
		line = strconv.AppendUint(line, k, 10)
		line = append(line, `","features":{`...)
		var sum float64
		for j := range keyedOwn {
			v := rng.Float64()
			sum += v * weightOf(s.Seed, k<<8|uint64(j)+1)
			line = fmt.Appendf(line, `"k%d.%d":%.3f,`, k, j, v)
		}
		var picked [keyedShared]int
		for j := range keyedShared {
			n := rng.IntN(keyedPool)
			for slices.Contains(picked[:j], n) { // distinct names
				n = rng.IntN(keyedPool)
			}
			picked[j] = n
			v := rng.Float64()
			sum += v * shared[n]
			line = fmt.Appendf(line, `"s%d":%.3f`, n, v)
			if j < keyedShared-1 {
				line = append(line, ',')
			}
		}
		label := sum > 0
		if rng.Float64() < keyedNoise {
			label = !label
		}
		line = append(line, `},"label":`...)
		line = strconv.AppendInt(line, int64(b2u(label)), 10)
		line = append(line, "}\n"...)
		if _, err := w.Write(line); err != nil {
			return keyedStats{}, err
		}
	}
	if err := w.Flush(); err != nil {
		return keyedStats{}, err
	}
	st := keyedStats{Events: s.Events, Keys: len(counts)}
	for _, n := range counts {
		st.Heaviest = max(st.Heaviest, n)
	}
	return st, f.Close()
}

// weightOf returns the weight, in [-1, 1), of the feature of id x in the
// stream of seed: a hash, so the same feature weighs the same in every
// event.
func weightOf(seed, x uint64) float64 {
	r := rand.New(rand.NewPCG(seed, x))
	return 2*r.Float64() - 1
}
