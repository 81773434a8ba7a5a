package event

import (
	"strings"
	"testing"
)

// TestLabelErrorListsLabels: a label no configuration names is rejected
// with the labels that are configured, under the label each means, in
// every format.
func TestLabelErrorListsLabels(t *testing.T) {
	spam := Config{Positive: []string{"spam"}, Negative: []string{"ham", "1"}}
	many := make([]string, 10)
	for i := range many {
		many[i] = string(rune('a' + i))
	}
	for _, c := range []struct {
		name, file, in string
		cfg            Config
		want           string
	}{
		{"jsonl defaults", "e.jsonl", `{"features":{"v":1},"label":"maybe"}` + "\n", Config{},
			`"maybe" is not a configured label (+1: 1, true; -1: 0, -1, false)`},
		{"jsonl configured", "e.jsonl", `{"features":{"v":1},"label":"maybe"}` + "\n", spam,
			`"maybe" is not a configured label (+1: true, spam; -1: 1, 0, -1, false, ham)`},
		{"tsv", "e.tsv", "maybe\thello\n", spam,
			`"maybe" is not a configured label (+1: true, spam; -1: 1, 0, -1, false, ham)`},
		{"libsvm", "e.libsvm", "maybe 1:1\n", spam,
			`"maybe" is not a configured label (+1: true, spam; -1: 1, 0, -1, false, ham)`},
		{"csv", "e.csv", "v,label\n1,maybe\n", spam,
			`"maybe" is not a configured label (+1: true, spam; -1: 1, 0, -1, false, ham)`},
		{"classes", "e.jsonl", `{"features":{"v":1},"label":"1"}` + "\n", Config{Classes: []string{"cat", "dog", "fish"}},
			`"1" is not a configured label (classes: cat, dog, fish)`},
		{"many classes", "e.jsonl", `{"features":{"v":1},"label":"z"}` + "\n", Config{Classes: many},
			`"z" is not a configured label (classes: a, b, c, d, e, f, g, h, …)`},
	} {
		r, err := NewReader(strings.NewReader(c.in), c.file, c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var ev Event
		err = r.Next(&ev)
		if err == nil || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to end with %q", c.name, err, c.want)
		}
	}
}
