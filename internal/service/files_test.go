package service

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// filesInputs writes inputs of every format, each with bad records, into
// dir and returns their names, in the order a replay reads them: JSONL,
// LIBSVM (comments, blank lines, a bad label, an over-long line), CSV (a
// header, a quoted field spanning lines, a bad label), gzip-compressed
// LIBSVM, TSV text, and the JSONL again (its offsets start again at 1).
func filesInputs(t *testing.T, dir string) []string {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var js, svm, csv, tsv bytes.Buffer
	for i := range 700 {
		y := 2*r.IntN(2) - 1
		switch {
		case i%97 == 5:
			js.WriteString(`{"label": 1, "features": {"x": 1}` + "\n") // no closing brace
		case i%50 == 7:
			js.WriteString("\n   \n")
		default:
			fmt.Fprintf(&js, `{"id":"e%d","label":%d,"features":{"a":%.3f,"b":%.3f,"w=%d":1}}`+"\n", i, y, r.Float64()*float64(y), r.Float64(), r.IntN(9))
		}
		switch {
		case i%101 == 3:
			svm.WriteString("# a comment line\n\n")
		case i%89 == 11:
			svm.WriteString("7 1:1 2:0.5\n") // not a label
		case i == 400:
			fmt.Fprintf(&svm, "%d %s\n", y, strings.Repeat("3:1 ", 2000)) // over max_bytes
		}
		fmt.Fprintf(&svm, "%+d %d:1 %d:%.2f %d:1 # tail\n", y, 1+r.IntN(5), 6+r.IntN(5), r.Float64(), 20+r.IntN(30))
		if i == 0 {
			csv.WriteString("label,size,color,note\n")
		}
		switch {
		case i%61 == 9:
			fmt.Fprintf(&csv, "maybe,%d,red,x\n", i)
		case i%43 == 2:
			fmt.Fprintf(&csv, "%d,%.2f,blue,\"two\nlines, quoted\"\n", y, r.Float64()*10)
		default:
			fmt.Fprintf(&csv, "%d,%.2f,%s,plain\n", y, float64(y)+r.Float64()*3, []string{"red", "green", "blue"}[r.IntN(3)])
		}
		fmt.Fprintf(&tsv, "%d\tword%d word%d free offer %d\n", y, r.IntN(20), r.IntN(20)*y, i%7)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(svm.Bytes())
	zw.Close()
	jsonl := write("events.jsonl", js.Bytes())
	return []string{jsonl, write("points.libsvm", svm.Bytes()), write("table.csv", csv.Bytes()),
		write("points.libsvm.gz", gz.Bytes()), write("text.tsv", tsv.Bytes()), jsonl}
}

// `replay` is the service on a Files source: over inputs of every format,
// with bad records, blank and over-long lines, it learns what the bare
// pipeline loop over event.Reader (pipeline.Replay) learns — the same
// counts, refusals and model digests — and its dead letters name the same
// file, line and reason.
func TestFilesEqualsPipelineReplay(t *testing.T) {
	names := filesInputs(t, t.TempDir())
	c := parseConfig(t, `
input: {max_bytes: 4096}
features: {bits: 12}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ogd, algorithm: ogd, loss: hinge, eta: 0.1}
  - {name: wm, algorithm: weighted-majority, experts: [pct, ogd], eta: 0.5}
`)

	// The service.
	dead := &memSink{}
	src := filesource.NewFiles(names, pipeline.EventConfig(c), nil)
	s := newService(t, Options{Config: c, Source: src, DeadLetters: dead})
	run(t, s)
	reps, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 {
		t.Fatalf("%d models, want 1", len(reps))
	}
	got := reps[0].Report

	// The bare loop, file after file.
	p, err := pipeline.New(c)
	if err != nil {
		t.Fatal(err)
	}
	want := &collectDead{}
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := event.NewReader(f, name, pipeline.EventConfig(c))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Replay(context.Background(), r, want, nil); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	wantRep, err := p.Report()
	if err != nil {
		t.Fatal(err)
	}
	got.Seconds, wantRep.Seconds = 0, 0
	if !reflect.DeepEqual(got, wantRep) {
		t.Errorf("service over the files:\n%+v\nbare loop:\n%+v", got, wantRep)
	}
	if got.Events < 4000 || got.Invalid < 35 || len(got.InvalidByReason) < 3 {
		t.Errorf("events %d, invalid %d by %v: the inputs were not read whole", got.Events, got.Invalid, got.InvalidByReason)
	}

	var letters []string
	for _, m := range dead.messages() {
		var d struct {
			Source string
			Offset int64
			Reason string
		}
		if err := json.Unmarshal(m, &d); err != nil {
			t.Fatal(err)
		}
		letters = append(letters, fmt.Sprintf("%s:%d %s", d.Source, d.Offset, d.Reason))
	}
	if !reflect.DeepEqual(letters, want.letters) {
		t.Errorf("dead letters:\n%v\nwant:\n%v", letters, want.letters)
	}
}

type collectDead struct{ letters []string }

func (c *collectDead) DeadLetter(d pipeline.DeadLetter) error {
	c.letters = append(c.letters, fmt.Sprintf("%s:%d %s", d.Source, d.Offset, d.Reason))
	return nil
}

// Files says how long its reads of pipes waited (blocker).
var _ blocker = (*filesource.Files)(nil)
