package pipeline

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
)

// sparseLearners are learners of every kind a sparse pipeline holds: the
// sparse forms (Perceptron, AdaGrad, boosted Perceptrons), dense ones
// beside them (the kernel Perceptron), and a Weighted-Majority over both.
const sparseLearners = `
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: avg, algorithm: perceptron, average: true}
  - {name: ada, algorithm: adagrad, loss: logistic, bias: true, calibrate: true}
  - {name: plain, algorithm: adagrad, normalized: false}
  - {name: boost, algorithm: adaboost-ol, weak_learners: 3, weak: {algorithm: perceptron, bias: true}, seed: 4}
  - {name: kp, algorithm: kernel-perceptron, max_support: 20}
  - {name: wm, algorithm: weighted-majority, experts: [pct, ada, kp], seed: 2}
`

// sparseMore are the other learners of a sparse form, and a one versus
// the rest of several classes.
const sparseMore = `
learners:
  - {name: ogd, algorithm: ogd, loss: logistic, bias: true, radius: 5}
  - {name: sq, algorithm: ogd, loss: squared, eta: 0.05}
  - {name: peg, algorithm: pegasos, lambda: 0.01, bias: true}
`

const sparseClasses = `
input: {classes: ["0", "1", "2"]}
learners:
  - {name: mc, algorithm: multiclass-perceptron}
  - {name: pct, algorithm: perceptron, bias: true}
`

// wordStream makes n events of 12 features each from a vocabulary of
// 3000 words (a few frequent, most rare), labeled by a noisy rule of
// their words. With delayed, most events wait for a label event that
// comes 0..40 records later (or never).
func wordStream(n int, delayed bool, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 13))
	zipf := rand.NewZipf(rng, 1.2, 1, 2999)
	type timed struct {
		at   float64
		line []byte
	}
	var all []timed
	for i := range n {
		var b bytes.Buffer
		fmt.Fprintf(&b, `{"id":"e%d","features":{`, i)
		score := rng.NormFloat64() * 0.5
		for f := range 12 {
			w := zipf.Uint64()
			v := rng.Float64()*2 - 1
			if w%3 == 0 {
				score += v
			}
			if f > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"w%d_%d":%.3f`, w, f, v)
		}
		label := 0
		if score > 0 {
			label = 1
		}
		if !delayed || rng.IntN(5) == 0 {
			fmt.Fprintf(&b, `},"label":%d}`, label)
			all = append(all, timed{float64(i), b.Bytes()})
			continue
		}
		b.WriteString(`}}`)
		all = append(all, timed{float64(i), b.Bytes()})
		if rng.IntN(10) > 0 {
			all = append(all, timed{float64(i) + float64(rng.IntN(41)) + 0.5, fmt.Appendf(nil, `{"id":"e%d","label":%d}`, i, label)})
		}
	}
	slices.SortStableFunc(all, func(a, b timed) int { return cmp.Compare(a.at, b.at) })
	out := make([][]byte, len(all))
	for i, t := range all {
		out[i] = t.line
	}
	return out
}

// TestSparsePipeline: a sparse pipeline (Builder.Sparse) is the dense one
// bit for bit — the same predictions, reports and MarshalBinary on every
// 500th record, each restoring the other's state and going on — with and
// without a scaler and delayed labels, and its Clone is it too.
func TestSparsePipeline(t *testing.T) {
	t.Parallel()
	for _, v := range []struct{ name, head, learners string }{
		{"plain", "features: {bits: 18}\n", sparseLearners},
		{"scaled", "features: {bits: 18, scale: standard}\n", sparseLearners},
		{"delayed", "features: {bits: 12}\nlabels: {delayed: true, wait: 30, max_pending: 1000}\n", sparseLearners},
		{"gradients", "features: {bits: 18, scale: standard}\n", sparseMore},
		{"l2", "features: {bits: 16, scale: l2}\n", sparseMore},
		{"classes", "features: {bits: 18}\n", sparseClasses},
	} {
		t.Run(v.name, func(t *testing.T) {
			c := mustConfig(t, v.head+v.learners)
			lines := wordStream(4000, v.name == "delayed", 1)
			dec := mustDecoder(t, c)
			b := NewBuilder(c)
			dense, err := b.New()
			if err != nil {
				t.Fatal(err)
			}
			sparse, err := b.Sparse().New()
			if err != nil {
				t.Fatal(err)
			}
			if sparse.space == nil || !sparse.maps {
				t.Fatal("the sparse pipeline has no space")
			}
			for _, n := range sparse.nodes {
				// All but the kernel Perceptron, and the Weighted-Majority
				// over learners, which reads their advice.
				if !n.sparse && n.algorithm != "kernel-perceptron" && n.algorithm != "weighted-majority" {
					t.Errorf("learner %s (%s) is not sparse", n.name, n.algorithm)
				}
			}
			var ev event.Event
			for i, line := range lines {
				if err := dec.Decode(line, &ev); err != nil {
					t.Fatal(err)
				}
				processBoth(t, i, dense, sparse, &ev)
				if i%500 != 499 {
					continue
				}
				bd, bs := sameState(t, i, dense, sparse)
				// Each restores the other's state; the sparse one's clone is it.
				if dense, err = b.Decode(bs); err != nil {
					t.Fatal(err)
				}
				if sparse, err = b.Sparse().Decode(bd); err != nil {
					t.Fatal(err)
				}
				clone, err := sparse.Clone()
				if err != nil {
					t.Fatal(err)
				}
				if clone.space == nil || !bytes.Equal(mustMarshal(t, clone), bd) {
					t.Fatalf("record %d: the sparse pipeline's clone is not sparse, or not it", i)
				}
			}
		})
	}
}

// withKeys gives each record of a wordStream, in order, the key "u-N",
// N = key(i) of its index: models per key of it.
func withKeys(lines [][]byte, key func(i int) uint64) [][]byte {
	for i, line := range lines {
		lines[i] = append(fmt.Appendf(nil, `{"key":"u-%d",`, key(i)), line[1:]...)
	}
	return lines
}

// processBoth runs ev, record i, through dense and sparse, and fails t
// unless they predict the same and reject alike.
func processBoth(t *testing.T, i int, dense, sparse *Pipeline, ev *event.Event) {
	t.Helper()
	pd, rd := dense.Process(ev)
	pd = slices.Clone(pd)
	ps, rs := sparse.Process(ev)
	if rd != rs || !slices.Equal(pd, ps) {
		t.Fatalf("record %d: dense %v %q, sparse %v %q", i, pd, rd, ps, rs)
	}
}

// sameState fails t unless dense and sparse, after record i, encode to
// the same bytes and report the same; it returns their encodings.
func sameState(t *testing.T, i int, dense, sparse *Pipeline) (bd, bs []byte) {
	t.Helper()
	bd, bs = mustMarshal(t, dense), mustMarshal(t, sparse)
	if !bytes.Equal(bd, bs) {
		t.Fatalf("record %d: the encodings differ", i)
	}
	if d, s := reportJSON(t, dense), reportJSON(t, sparse); d != s {
		t.Fatalf("record %d: reports differ:\ndense  %s\nsparse %s", i, d, s)
	}
	return bd, bs
}

// mustMarshal returns p's MarshalBinary (a Pipeline's, a Keyed's),
// failing t on error.
func mustMarshal(t *testing.T, p encoding.BinaryMarshaler) []byte {
	t.Helper()
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reportJSON is p's report without its clock, as JSON.
func reportJSON(t *testing.T, p *Pipeline) string {
	t.Helper()
	r, err := p.Report()
	if err != nil {
		t.Fatal(err)
	}
	r.Seconds = 0
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
