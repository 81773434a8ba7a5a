package boost

import (
	"errors"
	"fmt"
	"math"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/online"
)

// MaxWeak is the most weak learners a booster takes: the weak learners'
// predictions it served travel in online.Prediction.Advice, one bit each.
const MaxWeak = 64

// DefaultWeak is the number of weak learners when the configuration gives
// none.
const DefaultWeak = 10

// Config configures AdaBoost.OL apart from its weak learners.
type Config struct {
	// Seed seeds the draws that choose which examples each weak learner
	// learns. Default 0.
	Seed uint64
}

// OL is AdaBoost.OL over weak online learners (see the package
// documentation). It owns its weak learners: they learn only what the
// booster passes them. Not safe for concurrent use.
type OL struct {
	weak  []online.Learner
	seed  uint64
	t     uint64    // rounds learned
	alpha []float64 // α^i
	// mistakes[i] is M_i, expert i's mistakes; weakMistakes[i] weak
	// learner i's own; shown[i] the examples it learned.
	mistakes, weakMistakes, shown []uint64
	// wsum[i] = Σ_t w_t^i and edge[i] = Σ_t w_t^i z_t^i: γ_i = edge/wsum.
	wsum, edge []float64
	preds      []online.Prediction // scratch: the weak learners' predictions
	den        []float64           // scratch: den[i] = 1 + e^{s^{i-1}} (see step)
	rounders   []online.Rounder    // weak[i] as a Rounder, or nil
}

// Space returns the Space of the weak learners when they are sparse
// (online.Spaced): b then reads vectors in its numbers. Nil when they are
// dense.
func (b *OL) Space() *online.Space {
	if s, ok := b.weak[0].(online.Spaced); ok {
		return s.Space()
	}
	return nil
}

// New returns AdaBoost.OL over weak, 1 to MaxWeak learners in their
// initial state, which it owns from now on.
func New(weak []online.Learner, cfg Config) (*OL, error) {
	if len(weak) < 1 || len(weak) > MaxWeak {
		return nil, fmt.Errorf("adaboost-ol: %d weak learners, want 1 to %d", len(weak), MaxWeak)
	}
	n := len(weak)
	rounders := make([]online.Rounder, n)
	for i, l := range weak {
		rounders[i], _ = l.(online.Rounder)
	}
	return &OL{rounders: rounders,
		weak: weak, seed: cfg.Seed,
		alpha:    make([]float64, n),
		mistakes: make([]uint64, n), weakMistakes: make([]uint64, n), shown: make([]uint64, n),
		wsum: make([]float64, n), edge: make([]float64, n),
		preds: make([]online.Prediction, n), den: make([]float64, n+1),
	}, nil
}

// sign returns the label of a score: +1 when it is > 0, -1 otherwise.
func sign(s float64) int8 {
	if s > 0 {
		return online.Positive
	}
	return online.Negative
}

// expWeight[k] is e^{-k}, an expert's weight k mistakes behind the best;
// beyond the table the weight is 0 (e^{-746} rounds to 0 in float64).
var expWeight = func() []float64 {
	w := make([]float64, 746)
	for k := range w {
		w[k] = math.Exp(-float64(k))
	}
	return w
}()

func (b *OL) weight(i int, best uint64) float64 {
	if d := b.mistakes[i] - best; d < uint64(len(expWeight)) {
		return expWeight[d]
	}
	return 0
}

func (b *OL) best() uint64 {
	m := b.mistakes[0]
	for _, v := range b.mistakes[1:] {
		m = min(m, v)
	}
	return m
}

// vote returns the booster's prediction from the weak learners' labels in
// b.preds: the experts' weighted vote, Score its value in [-1, 1].
func (b *OL) vote() online.Prediction {
	best := b.best()
	var p online.Prediction
	var s, vote, total float64
	for i := range b.weak {
		h := b.preds[i].Label
		if h == online.Positive {
			p.Advice |= 1 << i
		}
		s += b.alpha[i] * float64(h)
		v := b.weight(i, best)
		vote += v * float64(sign(s))
		total += v
	}
	p.Score = vote / total // the best expert's weight is 1: total ≥ 1
	p.Label = sign(p.Score)
	return p
}

// Predict asks every weak learner for its prediction of x and returns the
// experts' weighted vote, with the weak learners' labels in Advice.
func (b *OL) Predict(x online.Vector) online.Prediction {
	for i, l := range b.weak {
		b.preds[i] = l.Predict(x)
	}
	return b.vote()
}

// Learn learns the label y of x, whose prediction served carries in
// Advice the weak learners' labels then (see the package documentation).
// A weak learner drawn to learn x learns it from its prediction now: with
// labels that come late it may have learned since.
func (b *OL) Learn(x online.Vector, served online.Prediction, y int8) {
	b.step(x, served.Advice, y, 0, false)
}

// Round plays a labeled round: Predict, Loss and Learn in one pass, each
// weak learner predicting once (by its own Round when it is drawn to learn
// and has one). A weak learner's draw depends on the experts before it,
// not on its own prediction, so it is known before it predicts. The
// draws and the denominators 1+e^{s} it computes are step's.
func (b *OL) Round(x online.Vector, y int8) (online.Prediction, float64) {
	t, fy := b.t+1, float64(y)
	var shat float64
	var drawn uint64
	b.den[0] = 2 // 1 + e^0
	for i, l := range b.weak {
		switch {
		case uniform(b.seed, t, i) >= 1/b.den[i]:
			b.preds[i] = l.Predict(x)
		case b.rounders[i] != nil:
			drawn |= 1 << i
			b.preds[i], _ = b.rounders[i].Round(x, y)
		default:
			drawn |= 1 << i
			b.preds[i] = l.Predict(x)
			l.Learn(x, b.preds[i], y)
		}
		shat += b.alpha[i] * float64(b.preds[i].Label)
		b.den[i+1] = 1 + math.Exp(fy*shat)
	}
	p := b.vote()
	b.step(x, p.Advice, y, drawn, true)
	return p, b.Loss(p, y)
}

// step learns the label y given the weak learners' labels in advice:
// edges, experts' mistakes, the α-steps and the draws. From Round (known)
// the draws are drawn and b.den holds the denominators, and the weak
// learners drawn have learned already; otherwise step computes both and
// the weak learners drawn learn x. den[i] = 1 + e^{s^{i-1}} is both weak
// learner i's weight 1/den[i] and, as den[i+1], the α-step's divisor.
func (b *OL) step(x online.Vector, advice uint64, y int8, drawn uint64, known bool) {
	b.t++
	eta := 4 / math.Sqrt(float64(b.t))
	fy := float64(y)
	var shat float64 // ŝ^{i-1}; the margin s^{i-1} is fy·shat
	if !known {
		b.den[0] = 2
	}
	for i, l := range b.weak {
		h := online.Negative
		if advice>>i&1 == 1 {
			h = online.Positive
		}
		if h != y {
			b.weakMistakes[i]++
		}
		z := fy * float64(h)
		w := 1 / b.den[i]
		b.wsum[i] += w
		b.edge[i] += w * z
		draw := drawn>>i&1 == 1
		if !known {
			draw = uniform(b.seed, b.t, i) < w
		}
		shat += b.alpha[i] * float64(h)
		if sign(shat) != y {
			b.mistakes[i]++
		}
		if !known {
			b.den[i+1] = 1 + math.Exp(fy*shat)
		}
		b.alpha[i] = min(2, max(-2, b.alpha[i]+eta*z/b.den[i+1]))
		if draw {
			b.shown[i]++
			if !known {
				l.Learn(x, l.Predict(x), y)
			}
		}
	}
}

// uniform returns a number in [0, 1) that is a fixed function of the
// seed, the round and the weak learner: SplitMix64's finalizer over the
// three, its top 53 bits.
func uniform(seed, t uint64, i int) float64 {
	z := seed ^ t*0x9e3779b97f4a7c15 ^ uint64(i+1)*0xd1b54a32d192ed03
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// Loss is the 0-1 loss of the predicted label.
func (b *OL) Loss(p online.Prediction, y int8) float64 {
	if p.Label != y {
		return 1
	}
	return 0
}

// c is the Weighted Majority constant 1/ln(2/(1+β)) for β = e^{-1}.
var c = 1 / math.Log(2*math.E/(1+math.E))

// Guarantee returns the mistake bound of the package documentation after
// the rounds learned so far; the comparator is the best expert, and the
// regret bound the Weighted Majority step's, (c-1)M* + c ln N.
func (b *OL) Guarantee() online.Guarantee {
	T := float64(b.t)
	n := float64(len(b.weak))
	var g2 float64
	for i := range b.weak {
		g2 += b.Edge(i) * b.Edge(i)
	}
	m := T
	if g2 > 0 {
		m = min(T, (4*math.Ln2*T+24*n*math.Sqrt(T))/g2)
	}
	best := float64(b.best())
	return online.Guarantee{
		Kind:           online.MistakeBound,
		Value:          c * (m + math.Log(n)),
		Comparator:     "best_expert",
		ComparatorLoss: best,
		RegretBound:    (c-1)*best + c*math.Log(n),
	}
}

// Edge returns γ_i, weak learner i's edge so far (0 before any round).
func (b *OL) Edge(i int) float64 {
	if b.wsum[i] == 0 {
		return 0
	}
	return b.edge[i] / b.wsum[i]
}

// WeakStats returns, for weak learner i, its weight α^i, its mistakes
// on every round (whether or not it learned the example) and the number
// of examples it learned.
func (b *OL) WeakStats(i int) (alpha float64, mistakes, learned uint64) {
	return b.alpha[i], b.weakMistakes[i], b.shown[i]
}

// ExpertMistakes returns M_i, the mistakes of expert i (the sign of the
// first i+1 weak learners' weighted sum).
func (b *OL) ExpertMistakes(i int) uint64 { return b.mistakes[i] }

// encoding: version, tag, N, seed, t, then per weak learner α, M_i, its
// mistakes, its examples, W_i, Σ w z, and its state as a blob.
const (
	encodingVersion = 1
	tag             = 'B'
)

// MarshalBinary returns the booster's state with its weak learners'.
func (b *OL) MarshalBinary() ([]byte, error) {
	var e codec.Encoder
	e.U8(encodingVersion)
	e.U8(tag)
	e.U32(uint32(len(b.weak)))
	e.U64(b.seed)
	e.U64(b.t)
	for i, l := range b.weak {
		e.F64(b.alpha[i])
		e.U64(b.mistakes[i])
		e.U64(b.weakMistakes[i])
		e.U64(b.shown[i])
		e.F64(b.wsum[i])
		e.F64(b.edge[i])
		st, err := l.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("adaboost-ol: weak learner %d: %w", i, err)
		}
		e.Blob(st)
	}
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary for the same
// configuration; on error the state is unchanged.
func (b *OL) UnmarshalBinary(p []byte) error {
	d := codec.NewDecoder(p)
	v, tg := d.U8(), d.U8()
	n, seed, t := d.U32(), d.U64(), d.U64()
	switch {
	case d.Err() != nil:
		return fmt.Errorf("adaboost-ol: %w", d.Err())
	case v != encodingVersion:
		return fmt.Errorf("adaboost-ol: encoding version %d, want %d", v, encodingVersion)
	case tg != tag:
		return fmt.Errorf("adaboost-ol: encoding of learner %q, want %q", tg, tag)
	case int(n) != len(b.weak):
		return fmt.Errorf("adaboost-ol: encoding has %d weak learners, want %d", n, len(b.weak))
	case seed != b.seed:
		return errors.New("adaboost-ol: encoding has another seed")
	}
	k := len(b.weak)
	alpha, wsum, edge := make([]float64, k), make([]float64, k), make([]float64, k)
	mis, wmis, shown := make([]uint64, k), make([]uint64, k), make([]uint64, k)
	states := make([][]byte, k)
	for i := range k {
		alpha[i], mis[i], wmis[i], shown[i] = d.F64(), d.U64(), d.U64(), d.U64()
		wsum[i], edge[i] = d.F64(), d.F64()
		states[i] = d.Blob()
		if d.Err() == nil && (!(alpha[i] >= -2 && alpha[i] <= 2) || mis[i] > t || wmis[i] > t || shown[i] > t) {
			d.Fail("weak learner %d: counts or weight out of range", i)
		}
		// Each round adds w ∈ (0, 1] to W_i and w·(±1) to Σ w z; the first
		// weak learner's w is ½ on every round, exactly.
		if d.Err() == nil && (!(wsum[i] >= 0 && wsum[i] <= float64(t)) || !(math.Abs(edge[i]) <= wsum[i]) ||
			(t > 0) != (wsum[i] > 0) || (i == 0 && wsum[0] != float64(t)/2)) {
			d.Fail("weak learner %d: edge sums out of range", i)
		}
	}
	if err := d.Finish(); err != nil {
		return fmt.Errorf("adaboost-ol: %w", err)
	}
	// The weak learners restore one by one; if one refuses, those before
	// it are put back.
	old := make([][]byte, k)
	for i, l := range b.weak {
		st, err := l.MarshalBinary()
		if err != nil {
			return fmt.Errorf("adaboost-ol: weak learner %d: %w", i, err)
		}
		old[i] = st
	}
	for i, l := range b.weak {
		if err := l.UnmarshalBinary(states[i]); err != nil {
			for j := range i {
				_ = b.weak[j].UnmarshalBinary(old[j]) // its own encoding: restores
			}
			return fmt.Errorf("adaboost-ol: weak learner %d: %w", i, err)
		}
	}
	b.t = t
	b.alpha, b.mistakes, b.weakMistakes, b.shown, b.wsum, b.edge = alpha, mis, wmis, shown, wsum, edge
	return nil
}

var (
	_ online.Learner    = (*OL)(nil)
	_ online.Rounder    = (*OL)(nil)
	_ online.Guaranteed = (*OL)(nil)
)

// Bytes returns the bytes of the weak learners' arrays, of those that
// tell them (online.Sizer): sparse ones grow with their space.
func (b *OL) Bytes() int {
	n := 0
	for _, l := range b.weak {
		if s, ok := l.(online.Sizer); ok {
			n += s.Bytes()
		}
	}
	return n
}
