package serving

import (
	"fmt"
	"sync"
	"testing"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// TestKeyedServingRace: the serving copy of sparse models per key
// serves Predicts of one key, and of new keys, from several goroutines
// while the learning Keyed goes on (run with -race).
func TestKeyedServingRace(t *testing.T) {
	c, err := config.Parse("t.yaml", []byte("features: {bits: 12, scale: standard}\nmodels: {by: key}\nlearners:\n  - {name: pct, algorithm: perceptron, bias: true}\n  - {name: ada, algorithm: adagrad}\n  - {name: ogd, algorithm: ogd, bias: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := event.NewDecoder(pipeline.EventConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	k, err := pipeline.NewKeyed(c, pipeline.KeyedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	line := func(i int) []byte {
		return fmt.Appendf(nil, `{"key":"k%d","features":{"a%d":1,"b%d":0.5},"label":%d}`, i%3, i%17, i%5, i%2)
	}
	var ev event.Event
	for i := range 300 {
		if err := dec.Decode(line(i), &ev); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := k.Process(&ev); err != nil {
			t.Fatal(err)
		}
	}
	states, err := k.ServingStates(nil)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := NewKeyed(pipeline.NewBuilder(c), KeyedCopy{States: states})
	if err != nil {
		t.Fatal(err)
	}
	copies := NewCopies(1, true)
	copies.Add(0, pr)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, _ := event.NewDecoder(pipeline.EventConfig(c))
			var ev event.Event
			for i := range 200 {
				b := fmt.Appendf(nil, `{"key":"k%d","features":{"new%d_%d":1,"a1":2}}`, (i+g)%5, g, i)
				if err := d.Decode(b, &ev); err != nil {
					t.Error(err)
					return
				}
				p, err := copies.Pick(0, true, ev.Key)
				if err != nil {
					t.Error(err)
					return
				}
				p.Predict(nil, &ev)
			}
		}()
	}
	for i := 300; i < 600; i++ {
		if err := dec.Decode(line(i), &ev); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := k.Process(&ev); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}
