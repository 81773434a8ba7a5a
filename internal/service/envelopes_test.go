package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
)

// fetchOnly hides a source's FetchBatch: the loop takes its records one by
// one.
type fetchOnly struct{ connectors.Source }

// writeEnvelopes writes values as a recording of partitions partitions
// (value i in partition i%partitions, its values in base64, as `record
// --envelope` writes a record that is not JSON), the partitions
// interleaved in blocks of block values, the value at line badLine (from
// 1; 0: none) not base64, and returns its path.
func writeEnvelopes(t *testing.T, values [][]byte, partitions, block, badLine int) string {
	t.Helper()
	var b strings.Builder
	next, line := make([]int64, partitions), 0
	for start := 0; start < len(values); start += block * partitions {
		for p := range partitions {
			for i := start + p; i < min(start+block*partitions, len(values)); i += partitions {
				line++
				v := base64.StdEncoding.EncodeToString(values[i])
				if line == badLine {
					v = "not base64!"
				}
				fmt.Fprintf(&b, `{"partition":%d,"offset":%d,"key":"k%d","value_base64":"%s"}`+"\n", p, next[p], i, v)
				next[p]++
			}
		}
	}
	path := filepath.Join(t.TempDir(), "rec.envelopes.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEnvelopeBatches: a recording of three partitions learned from the
// batches of one partition the source hands over (FetchBatch, handed to
// the workers as they are, the values decoded there) gives every
// partition the model, predictions and dead letters, in order, of the
// same records taken one by one (Fetch); a value that is not base64
// stops Run with the error naming its line, its partition's model having
// learned exactly the records before it.
func TestEnvelopeBatches(t *testing.T) {
	c := parseConfig(t, tableYAML)
	values := genEvents(4000, 11, 0.1, 0.1, 53)
	path := writeEnvelopes(t, values, 3, 37, 0)
	type outcome struct {
		reports     []Report
		preds, dead map[int32][]string
	}
	learn := func(src connectors.Source) outcome {
		t.Helper()
		preds, dead := &memSink{}, &memSink{}
		s := newService(t, Options{Config: c, Source: src, Predictions: preds, DeadLetters: dead, CommitEvery: 100})
		run(t, s)
		reps, err := s.Reports()
		if err != nil {
			t.Fatal(err)
		}
		o := outcome{reports: reps, preds: map[int32][]string{}, dead: map[int32][]string{}}
		for _, m := range preds.messages() {
			var p predictionMsg
			decodeStrict(t, m, &p)
			o.preds[p.Partition] = append(o.preds[p.Partition], string(m))
		}
		for _, m := range dead.messages() {
			var d struct {
				Partition int32 `json:"partition"`
			}
			if err := json.Unmarshal(m, &d); err != nil {
				t.Fatal(err)
			}
			o.dead[d.Partition] = append(o.dead[d.Partition], string(m))
		}
		return o
	}
	batched := filesource.NewEnvelopes([]string{path}, nil, -1, c.Input.MaxBytes)
	defer batched.Close()
	if _, ok := any(batched).(connectors.Batcher); !ok {
		t.Fatal("Envelopes is no batcher: nothing tested")
	}
	one := filesource.NewEnvelopes([]string{path}, nil, -1, c.Input.MaxBytes)
	defer one.Close()
	got, want := learn(batched), learn(fetchOnly{one})
	if len(got.reports) != 3 || len(want.reports) != 3 {
		t.Fatalf("%d and %d reports, want 3", len(got.reports), len(want.reports))
	}
	for i, r := range got.reports {
		w := want.reports[i]
		if r.Partition != w.Partition || r.Events == 0 || !sameLearners(r.Report, w.Report) {
			t.Errorf("partition %d: %d events, mistakes %+v; one by one: partition %d, %d events, %+v", r.Partition, r.Events, r.Learners, w.Partition, w.Events, w.Learners)
		}
	}
	for p := range int32(3) {
		if len(want.preds[p]) == 0 || len(want.dead[p]) == 0 || !slices.Equal(got.preds[p], want.preds[p]) || !slices.Equal(got.dead[p], want.dead[p]) {
			t.Errorf("partition %d: %d predictions and %d dead letters, one by one %d and %d, or not the same", p, len(got.preds[p]), len(got.dead[p]), len(want.preds[p]), len(want.dead[p]))
		}
	}

	const badLine = 1000
	bad := writeEnvelopes(t, values, 3, 37, badLine)
	src := filesource.NewEnvelopes([]string{bad}, nil, -1, c.Input.MaxBytes)
	defer src.Close()
	s := newService(t, Options{Config: c, Source: src})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := s.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d is not a record", badLine)) {
		t.Fatalf("Run: %v, want line %d named", err, badLine)
	}
	// The bad line's partition learned the records before it: what the
	// lines before it alone, taken one by one, teach it.
	lines, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	before := strings.SplitAfter(string(lines), "\n")[:badLine-1]
	var part int32
	if _, err := fmt.Sscanf(strings.SplitAfter(string(lines), "\n")[badLine-1], `{"partition":%d,`, &part); err != nil {
		t.Fatal(err)
	}
	head := filepath.Join(t.TempDir(), "head.envelopes.jsonl")
	if err := os.WriteFile(head, []byte(strings.Join(before, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	headSrc := filesource.NewEnvelopes([]string{head}, nil, part, c.Input.MaxBytes)
	defer headSrc.Close()
	wantReps := learn(fetchOnly{headSrc}).reports
	reps, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(reps, func(r Report) bool { return r.Partition == part })
	if i < 0 || len(wantReps) != 1 || !sameLearners(reps[i].Report, wantReps[0].Report) {
		t.Errorf("partition %d of the bad line: %+v, want the model of the %d lines before it: %+v", part, reps[i].Learners, badLine-1, wantReps[0].Learners)
	}
}
