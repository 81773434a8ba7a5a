package pipeline

import (
	"slices"
	"testing"
)

// ReadKeyed reads, without a configuration, what a Keyed's encoding
// holds: its totals, every key's counts and mix, each key's model's
// digest (that of the key's model encoded alone) and the global model's;
// a damaged encoding is an error.
func TestReadKeyed(t *testing.T) {
	c := mustConfig(t, keyedConfig)
	all, _ := keyedStream(3000, 25, 3)
	for _, global := range []bool{false, true} {
		k, err := NewKeyed(c, KeyedOptions{Max: 5, Global: global})
		if err != nil {
			t.Fatal(err)
		}
		feedKeyed(t, k, mustDecoder(t, c), all)
		b, err := k.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadKeyed(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.Events != k.Seen() || got.Learned != k.Learned() || got.Learners != len(k.names) || (got.Global != nil) != global {
			t.Errorf("global %v: totals %d events, %d learned, %d learners, global %v; want %d, %d, %d, %v", global,
				got.Events, got.Learned, got.Learners, got.Global != nil, k.Seen(), k.Learned(), len(k.names), global)
		}
		if global {
			want, err := k.global.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if d, _ := ModelDigest(want); got.GlobalSHA256 != d {
				t.Errorf("global model digest %x, want %x", got.GlobalSHA256, d)
			}
		}
		keys := k.Keys()
		if len(got.Keys) != len(keys) || len(keys) != 25 {
			t.Fatalf("global %v: %d keys read, the Keyed has %d (want 25)", global, len(got.Keys), len(keys))
		}
		i := 0
		err = k.Each(func(key string, p *Pipeline) error {
			kc := got.Keys[i]
			i++
			st := k.stats[key]
			state, err := p.MarshalBinary()
			if err != nil {
				return err
			}
			d, err := ModelDigest(state)
			if err != nil {
				return err
			}
			if kc.Key != key || kc.Events != st.Events || !slices.Equal(kc.Mistakes, st.Mistakes) || !slices.Equal(kc.Mix, st.Mix) ||
				kc.ModelSHA256 != d || kc.StateBytes != len(state) {
				t.Errorf("key %q: read %+v; the Keyed has %d events, mistakes %v, mix %v, digest %x, %d bytes",
					key, kc, st.Events, st.Mistakes, st.Mix, d, len(state))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 1
		if _, err := ReadKeyed(b); err == nil {
			t.Errorf("global %v: a damaged encoding read without error", global)
		}
	}
}
