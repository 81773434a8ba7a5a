package experts

import (
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// classStream returns streams over c's features labeled by a hypothesis
// of the seed, 10% of labels flipped.
func classStream(c *Class) func(seed uint64) []onlinetest.Example {
	return func(seed uint64) []onlinetest.Example {
		r := rand.New(rand.NewPCG(seed, 0xc1a55))
		target := r.IntN(c.Len())
		out := make([]onlinetest.Example, 300)
		for k := range out {
			x := randomEvent(r, c)
			y := label(c, target, x)
			if r.IntN(10) == 0 {
				y = -y
			}
			out[k] = onlinetest.Example{X: x, Y: y}
		}
		return out
	}
}

func TestConformance(t *testing.T) {
	for name, c := range testClasses(t) {
		stream := classStream(c)
		onlinetest.Run(t, name+"/consistent", func() online.Learner { return NewConsistent(c) }, stream)
		onlinetest.Run(t, name+"/halving", func() online.Learner { return NewHalving(c) }, stream)
		onlinetest.Run(t, name+"/soa", func() online.Learner { return NewSOA(c) }, stream)
		onlinetest.Run(t, name+"/weighted-majority", func() online.Learner {
			l, err := NewWeightedMajority(c, HedgeConfig{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, stream)
	}
}
