package pipeline

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
)

// A frozen state is the state of the moment it was taken: encoded on
// another goroutine while the pipeline learns on (under -race, a shared
// slice is a data race), it gives MarshalBinary's bytes at that moment
// and the report's state digests of that moment — for every algorithm,
// scaling, calibrations, several classes and a store of events waiting
// for their labels, with the tracker's history.
func TestFreeze(t *testing.T) {
	calibrated := strings.Replace(calibConfig, "input: {positive: [spam], negative: [ham]}\n", "", 1)
	var calibLines, multiLines, delayedLines [][]byte
	for i := range 1200 {
		v := float64(i%97) / 96
		calibLines = append(calibLines, fmt.Appendf(nil, `{"features":{"v":%g,"w":%d},"label":%d}`, v, i%5, (i*7)%3%2))
	}
	multiLines = multiclassStream(1200, 2)
	for _, r := range delayedStream(1200, 40, 3) {
		delayedLines = append(delayedLines, []byte(r.line))
	}
	for _, tc := range []struct {
		name, config string
		lines        [][]byte
	}{
		{"every algorithm", stateConfig, bytes.Split(bytes.TrimSpace(saltedDemo(t, 1200).data), []byte("\n"))},
		{"calibrated", calibrated, calibLines},
		{"classes", multiclassConfig, multiLines},
		{"delayed labels", fmt.Sprintf(delayedYAML, 60, 500, ""), delayedLines},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustConfig(t, tc.config)
			p := mustNew(t, c)
			p.Tracker().EnableHistory(64) // filled, halved and filled again
			d := mustDecoder(t, c)
			var ev event.Event
			run := func(lines [][]byte) {
				for _, line := range lines {
					if d.Decode(line, &ev) != nil {
						p.Reject("bad")
						continue
					}
					p.Process(&ev)
				}
			}
			half := len(tc.lines) / 2
			run(tc.lines[:half])
			f, err := p.Freeze(nil)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := p.Report()
			if err != nil {
				t.Fatal(err)
			}
			want, err := p.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			var digests [][32]byte
			var encErr error
			var wg sync.WaitGroup
			wg.Go(func() { got, digests, encErr = f.Encode() })
			run(tc.lines[half:]) // while the copy is encoded
			wg.Wait()
			if encErr != nil {
				t.Fatal(encErr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("the frozen state (%d bytes) is not the state of its moment (%d bytes)", len(got), len(want))
			}
			if len(digests) != len(rep.Learners) {
				t.Fatalf("%d digests for %d learners", len(digests), len(rep.Learners))
			}
			for i, l := range rep.Learners {
				if hex.EncodeToString(digests[i][:]) != l.StateSHA256 || l.StateSHA256 == "" {
					t.Errorf("learner %s: digest %x, the report of its moment has %q", l.Name, digests[i], l.StateSHA256)
				}
			}
			now, err := p.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(now, want) {
				t.Fatal("the second half changed nothing: the test proves nothing")
			}
			// Encoded again, a frozen state does not move.
			again, err := f.MarshalBinary()
			if err != nil || !bytes.Equal(again, want) {
				t.Fatalf("encoded again: %v, equal %v", err, bytes.Equal(again, want))
			}
			// Taken again into the memory of an earlier copy: of p (the
			// last checkpoint's), or of a new pipeline of the same
			// configuration with a shorter history (the memory a
			// service makes beforehand for a model's first checkpoint):
			// nothing of the earlier copy is left in it.
			fresh := mustNew(t, c)
			fresh.Tracker().EnableHistory(16)
			blank, err := fresh.Freeze(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, into := range []struct {
				name string
				f    *Frozen
			}{{"the earlier copy", f}, {"a new pipeline's copy", blank}} {
				g, err := p.Freeze(into.f)
				if err != nil {
					t.Fatal(err)
				}
				got, digests, err := g.Encode()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, now) {
					t.Errorf("taken into %s, the state (%d bytes) is not the pipeline's (%d bytes)", into.name, len(got), len(now))
				}
				rep, err := p.Report()
				if err != nil {
					t.Fatal(err)
				}
				for i, l := range rep.Learners {
					if hex.EncodeToString(digests[i][:]) != l.StateSHA256 {
						t.Errorf("taken into %s, learner %s: digest %x, the report has %q", into.name, l.Name, digests[i], l.StateSHA256)
					}
				}
			}
		})
	}
}
