package pipeline

import (
	"slices"
	"testing"
)

// A spilled key's report takes its state digests from the spill's
// encoding: they are those of its model decoded and encoded again, for
// every learner (the Weighted-Majority over learners, the calibrated
// AdaGrad, the SOA included). A key a restore put in the spill is
// marked so until its next event (its encoding may be another build's),
// and reports the same digests.
func TestKeyedSpilledDigests(t *testing.T) {
	c := mustConfig(t, keyedConfig)
	all, byKey := keyedStream(2000, 30, 9)
	dec := mustDecoder(t, c)
	k, err := NewKeyed(c, KeyedOptions{Max: 4})
	if err != nil {
		t.Fatal(err)
	}
	feedKeyed(t, k, dec, all)
	if k.Resident() != 4 || k.Len() != len(byKey) {
		t.Fatalf("%d of %d keys resident, want 4 of %d", k.Resident(), k.Len(), len(byKey))
	}
	digests := func(k *Keyed, key string) []string {
		t.Helper()
		r, err := k.KeyReport(key)
		if err != nil {
			t.Fatal(err)
		}
		var ds []string
		for _, l := range r.Learners {
			ds = append(ds, l.StateSHA256)
		}
		return ds
	}
	want := map[string][]string{}
	spilled := 0
	for _, key := range k.Keys() {
		want[key] = digests(k, key)
		b, ok, err := k.spill.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		spilled++
		p, err := k.build.Decode(b) // not noted: the report encodes each learner
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Report()
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range r.Learners {
			if l.StateSHA256 == "" || l.StateSHA256 != want[key][i] {
				t.Errorf("key %q, %s: digest %q from the spill's encoding, %q encoded again", key, l.Name, want[key][i], l.StateSHA256)
			}
		}
	}
	if spilled != len(byKey)-4 {
		t.Fatalf("%d keys spilled, want %d", spilled, len(byKey)-4)
	}

	state, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewKeyed(c, KeyedOptions{Max: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	for _, key := range r.Keys() {
		if !r.stats[key].restored() {
			t.Errorf("key %q restored into the spill, not marked so", key)
		}
		if got := digests(r, key); !slices.Equal(got, want[key]) {
			t.Errorf("key %q restored: digests %q, want %q", key, got, want[key])
		}
	}
	var key string
	for key = range byKey {
		break
	}
	feedKeyed(t, r, dec, byKey[key][:1])
	if r.stats[key].restored() {
		t.Errorf("key %q learned since the restore, still marked restored", key)
	}
}
