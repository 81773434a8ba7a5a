package online_test

import (
	"fmt"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// TestConformance runs every learner configuration of this package through
// the onlinetest suite.
func TestConformance(t *testing.T) {
	const bits = 8
	stream := onlinetest.LinearStream(bits, 300, 12, 0.1)
	for _, cfg := range []online.PerceptronConfig{
		{},
		{Bias: true},
		{Average: true},
		{Bias: true, Average: true},
		{Margin: 0.1, Bias: true},
	} {
		onlinetest.Run(t, fmt.Sprintf("perceptron%+v", cfg), func() online.Learner {
			p, err := online.NewPerceptron(bits, cfg)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}, stream)
	}
	for _, loss := range []string{online.LossHinge, online.LossLogistic, online.LossSquared} {
		for _, cfg := range []online.OGDConfig{
			{Eta: 0.1},
			{Eta: 0.5, Schedule: online.ScheduleFixed, Bias: true},
			{Eta: 1, Radius: 0.5, Bias: true},
			{Eta: 0.1, Schedule: online.ScheduleFixed, Bias: true, BiasEta: 0.01},
		} {
			cfg.Loss = loss
			onlinetest.Run(t, fmt.Sprintf("ogd%+v", cfg), func() online.Learner {
				o, err := online.NewOGD(bits, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return o
			}, stream)
		}
	}
}
