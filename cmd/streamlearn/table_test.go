package main

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"text/tabwriter"
)

// writeTable writes what text/tabwriter writes, byte for byte: over
// random tables of ragged rows (runs of rows with and without a column,
// as a report's rows with and without a default-labeled cell), empty
// cells, multi-byte runes, and cells with the writer's special bytes.
func TestWriteTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"", "a", "perceptron", "adagrad", "0.6911", "certificate max_margin <= 0.09251", "é", "naïve-bayes", "-", "12 rounds, 3 mistakes, 0.7500"}
	special := []string{"a\vb", "x\fy", "e\xffs\xffc", "t\tab", "n\nl"}
	for trial := range 3000 {
		rows := make([][]string, 1+rng.IntN(6))
		width := 1 + rng.IntN(5)
		for i := range rows {
			n := width
			if rng.IntN(3) == 0 {
				n = 1 + rng.IntN(width+1) // ragged
			}
			for range n {
				c := words[rng.IntN(len(words))]
				if trial%10 == 0 && rng.IntN(20) == 0 {
					c = special[rng.IntN(len(special))]
				}
				rows[i] = append(rows[i], c)
			}
		}
		var want, got bytes.Buffer
		tw := tabwriter.NewWriter(&want, 0, 0, 2, ' ', 0)
		for _, row := range rows {
			tw.Write([]byte(strings.Join(row, "\t") + "\n"))
		}
		tw.Flush()
		if err := writeTable(&got, rows); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("trial %d: %q\n got %q\nwant %q", trial, rows, got.String(), want.String())
		}
	}
}
