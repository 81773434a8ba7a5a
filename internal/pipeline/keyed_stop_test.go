package pipeline

import (
	"bytes"
	"errors"
	"testing"
)

// A FreezeUntil whose stop is closed gives up with ErrFreezeStopped and
// leaves k as it was: the Freeze after it encodes what MarshalBinary
// returns; one whose stop stays open is a Freeze.
func TestKeyedFreezeUntil(t *testing.T) {
	c := mustConfig(t, keyedConfig)
	all, _ := keyedStream(3000, 40, 7)
	k, err := NewKeyed(c, KeyedOptions{Max: 5, Global: true})
	if err != nil {
		t.Fatal(err)
	}
	feedKeyed(t, k, mustDecoder(t, c), all)
	stopped := make(chan struct{})
	close(stopped)
	if _, err := k.FreezeUntil(nil, stopped); !errors.Is(err, ErrFreezeStopped) {
		t.Fatalf("FreezeUntil with its stop closed: %v, want ErrFreezeStopped", err)
	}
	want, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f, err := k.FreezeUntil(nil, make(chan struct{}))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the freeze after one given up encodes %d bytes that differ from MarshalBinary's %d", len(got), len(want))
	}
}
