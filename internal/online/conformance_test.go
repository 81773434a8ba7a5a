package online_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// linear returns a constructor for each learner configuration of this
// package the conformance tests cover, by name.
func linear(t *testing.T, bits uint) map[string]func() online.Learner {
	ls := map[string]func() online.Learner{}
	for _, cfg := range []online.PerceptronConfig{
		{},
		{Bias: true},
		{Average: true},
		{Bias: true, Average: true},
		{Margin: 0.1, Bias: true},
	} {
		ls[fmt.Sprintf("perceptron%+v", cfg)] = func() online.Learner {
			p, err := online.NewPerceptron(bits, cfg)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	for _, loss := range []string{online.LossHinge, online.LossLogistic, online.LossSquared} {
		for _, cfg := range []online.OGDConfig{
			{Eta: 0.1},
			{Eta: 0.5, Schedule: online.ScheduleFixed, Bias: true},
			{Eta: 1, Radius: 0.5, Bias: true},
			{Eta: 0.1, Schedule: online.ScheduleFixed, Bias: true, BiasEta: 0.01},
		} {
			cfg.Loss = loss
			ls[fmt.Sprintf("ogd%+v", cfg)] = func() online.Learner {
				o, err := online.NewOGD(bits, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
		}
	}
	return ls
}

// TestConformance runs every learner configuration of this package through
// the onlinetest suite.
func TestConformance(t *testing.T) {
	const bits = 8
	stream := onlinetest.LinearStream(bits, 300, 12, 0.1)
	for name, mk := range linear(t, bits) {
		onlinetest.Run(t, name, mk, stream)
	}
}

// TestUpdateWithoutPredict: the linear learners recompute what Predict
// would have computed when Update comes without it, so a stream of bare
// Updates learns exactly what the same stream of rounds learns; and after
// a Round too, even one that follows a Predict without an Update (an
// unlabeled event).
func TestUpdateWithoutPredict(t *testing.T) {
	const bits = 8
	ex := onlinetest.LinearStream(bits, 300, 12, 0.1)(1)
	for name, mk := range linear(t, bits) {
		rounds, bare := mk(), mk()
		ref, mixed := mk(), mk()
		for k, e := range ex {
			rounds.Predict(e.X)
			rounds.Update(e.X, e.Y)
			bare.Update(e.X, e.Y)
			switch k % 3 {
			case 0: // unlabeled
				ref.Predict(e.X)
				mixed.Predict(e.X)
			case 1:
				ref.Predict(e.X)
				ref.Update(e.X, e.Y)
				mixed.(online.Rounder).Round(e.X, e.Y)
			case 2:
				ref.Update(e.X, e.Y)
				mixed.Update(e.X, e.Y)
			}
			if !bytes.Equal(marshal(t, bare), marshal(t, rounds)) {
				t.Errorf("%s: after %d rounds, Update alone learned another state than Predict then Update", name, k+1)
				break
			}
			if !bytes.Equal(marshal(t, mixed), marshal(t, ref)) {
				t.Errorf("%s: after %d events, Update alone after Round learned another state than after Predict and Update", name, k+1)
				break
			}
		}
	}
}

func marshal(t *testing.T, l online.Learner) []byte {
	t.Helper()
	b, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
