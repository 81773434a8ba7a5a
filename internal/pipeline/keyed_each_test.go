package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/config"
)

// EachOrdered on four goroutines gives what Each gives, in key order:
// every key's report (and its store's digest, with delayed labels and a
// scaler), resident or spilled to a file, over more keys than it shares
// at a time; the first error in key order is the one returned, with
// every key before it emitted and none after.
func TestKeyedEachOrdered(t *testing.T) {
	delayed := mustConfig(t, "features: {bits: 12, scale: standard}\nlabels: {delayed: true, wait: 30, max_pending: 1000}\n"+sparseMore)
	for _, c := range []*config.Config{mustConfig(t, keyedConfig), delayed} {
		eachOrdered(t, c)
	}
}

func eachOrdered(t *testing.T, c *config.Config) {
	all, byKey := keyedStream(3000, 2*eachChunk+40, 3)
	k, err := NewKeyed(c, KeyedOptions{Max: 20, SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	feedKeyed(t, k, mustDecoder(t, c), all)
	if k.Len() != len(byKey) || k.Len() <= 2*eachChunk || k.Resident() != 20 {
		t.Fatalf("%d keys, %d resident: want %d, more than %d, and 20", k.Len(), k.Resident(), len(byKey), 2*eachChunk)
	}
	report := func(key string, p *Pipeline) (string, error) {
		r, err := p.Report()
		r.Seconds = 0
		b, _ := json.Marshal(r)
		return fmt.Sprintf("%s %s %x", key, b, p.StoreDigest()), err
	}
	var want []string
	if err := k.Each(func(key string, p *Pipeline) error {
		s, err := report(key, p)
		want = append(want, s)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if c.Labels.Delayed && !strings.Contains(want[0], `"labels":{"joined"`) {
		t.Fatalf("with delayed labels, a report without its labels: %s", want[0])
	}
	var got []string
	if err := EachOrdered(k, 4, report, func(s string) error { got = append(got, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("EachOrdered's %d reports are not Each's %d, in key order", len(got), len(want))
	}
	keys := k.Keys()
	if len(want) != len(keys) || want[0][:len(keys[0])] != keys[0] {
		t.Fatalf("Each: %d reports of %d keys", len(want), len(keys))
	}

	failAt := eachChunk + 7 // in the second share
	boom := errors.New("boom")
	var emitted []string
	err = EachOrdered(k, 4, func(key string, p *Pipeline) (string, error) {
		if key == keys[failAt] || key == keys[failAt+3] {
			return "", boom
		}
		return key, nil
	}, func(key string) error { emitted = append(emitted, key); return nil })
	if !errors.Is(err, boom) || !slices.Equal(emitted, keys[:failAt]) {
		t.Errorf("failing at key %d: error %v, %d keys emitted", failAt, err, len(emitted))
	}
	emitted = emitted[:0]
	err = EachOrdered(k, 4, func(key string, p *Pipeline) (string, error) { return key, nil }, func(key string) error {
		if emitted = append(emitted, key); len(emitted) == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || !slices.Equal(emitted, keys[:3]) {
		t.Errorf("emit failing at the third key: error %v, %v emitted", err, emitted)
	}
}
