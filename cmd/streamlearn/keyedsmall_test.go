package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

// TestKeylessLabelHint: with models per key, label events without a key
// are said to have none, with how labels travel, not sent to labels.wait.
func TestKeylessLabelHint(t *testing.T) {
	p := writeFiles(t, map[string]string{
		"c.yaml":   "learners: [{name: p, algorithm: perceptron}]\nlabels: {delayed: true}\nmodels: {by: key}\n",
		"in.jsonl": `{"id":"a","key":"u1","features":{"x":1}}` + "\n" + `{"id":"b","key":"u2","features":{"x":1}}` + "\n" + `{"id":"a","label":1}` + "\n" + `{"id":"b","label":0}` + "\n",
	})
	code, _, errOut := run(t, "replay", "-c", p["c.yaml"], p["in.jsonl"])
	if code != exitNothingLearned || !strings.Contains(errOut, "first rejected (no key): ") ||
		!strings.Contains(errOut, "hint: the label has no key: with models per key (models.by: key) a label is joined to its event in the model of the event's key") ||
		strings.Contains(errOut, "labels.wait") {
		t.Errorf("replay of keyless labels: exit %d, stderr:\n%s\nwant %d, the first rejected having no key, a hint saying labels travel keyed, none about labels.wait", code, errOut, exitNothingLearned)
	}
}

// TestKeyedTotalsLabels: with models per key and delayed labels, the
// partition's totals have the labels of its keys summed, in the text
// (a labels: line) and in the JSON's totals line, which --report json
// prints after the keys as /v1/report has it (keys, evictions); a key's
// text report has no seconds (they are the whole replay's), the totals
// have them.
func TestKeyedTotalsLabels(t *testing.T) {
	var events strings.Builder
	for i := range 60 {
		key := fmt.Sprintf("u%d", i%3)
		fmt.Fprintf(&events, `{"id":"e%d","key":%q,"features":{"x":%d}}`+"\n", i, key, i%5)
		if i%4 != 3 { // every fourth event gets no label: expired
			fmt.Fprintf(&events, `{"id":"e%d","key":%q,"label":%d}`+"\n", i, key, i%2)
		}
	}
	events.WriteString(`{"id":"nope","key":"u1","label":1}` + "\n") // unknown
	p := writeFiles(t, map[string]string{
		"c.yaml":   "learners: [{name: p, algorithm: perceptron}]\nlabels: {delayed: true, wait: 5}\nmodels: {by: key, max: 2}\n",
		"in.jsonl": events.String(),
	})
	code, jsonOut, errOut := run(t, "replay", "-c", p["c.yaml"], "--report", "json", p["in.jsonl"])
	if code != 0 {
		t.Fatalf("replay --report json: exit %d: %s", code, errOut)
	}
	var sum pipeline.LabelsReport
	var totals []service.Report
	keys := 0
	dec := json.NewDecoder(strings.NewReader(jsonOut))
	for dec.More() {
		var r service.Report
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Key != nil:
			keys++
			l := r.Labels
			sum.Joined, sum.Pending, sum.Expired, sum.Unknown, sum.Late, sum.Duplicate = sum.Joined+l.Joined, sum.Pending+l.Pending, sum.Expired+l.Expired, sum.Unknown+l.Unknown, sum.Late+l.Late, sum.Duplicate+l.Duplicate
			sum.Delay.Max = max(sum.Delay.Max, l.Delay.Max)
		case r.Keys != nil:
			totals = append(totals, r)
		default:
			t.Fatalf("a line neither a key's nor a partition's totals: %+v", r)
		}
	}
	if keys != 3 || len(totals) != 1 {
		t.Fatalf("%d keys' lines and %d totals lines, want 3 and 1", keys, len(totals))
	}
	tl := totals[0]
	if tl.Keys.Keys != 3 || tl.Keys.Evicted == 0 || tl.Events != 60+45+1 {
		t.Errorf("totals: keys %+v, events %d; want 3 keys, evictions (max: 2), 106 records", *tl.Keys, tl.Events)
	}
	if l := tl.Labels; l == nil || l.Joined != sum.Joined || l.Pending != sum.Pending || l.Expired != sum.Expired || l.Unknown != sum.Unknown || l.Delay.Max != sum.Delay.Max ||
		sum.Joined != 45 || sum.Expired+sum.Pending != 15 || sum.Expired == 0 || sum.Unknown != 1 {
		t.Errorf("totals' labels %+v, the keys' summed %+v; want them equal, 45 joined, 15 expired or pending, 1 unknown", l, sum)
	}

	code, text, errOut := run(t, "replay", "-c", p["c.yaml"], p["in.jsonl"])
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errOut)
	}
	_, after, ok := strings.Cut(text, "partition 0: totals over 3 keys")
	wantLabels := fmt.Sprintf("labels: joined %d  pending %d  expired %d  late %d  unknown %d  duplicate %d  delay mean %.1f max %d records",
		sum.Joined, sum.Pending, sum.Expired, sum.Late, sum.Unknown, sum.Duplicate, tl.Labels.Delay.Mean, sum.Delay.Max)
	if !ok || !strings.Contains(after, "\n"+wantLabels+"\n") || !regexp.MustCompile(`\nevents 106  labeled \d+  predicted \d+  invalid \d+  in [0-9.]+s \(\d+ events/s\)\n`).MatchString(after) {
		t.Errorf("text totals:\n%s\nwant the records with the replay's seconds, and %q", after, wantLabels)
	}
	if n := strings.Count(text, "events/s"); n != 1 {
		t.Errorf("%d lines with seconds and a rate, want 1 (the totals'), not each key's:\n%s", n, text)
	}
}
