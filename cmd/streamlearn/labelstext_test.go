package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The text report of a model with labels later has a line of what became
// of the labels and of the events waiting, the numbers of --report json's
// labels section.
func TestTextReportLabels(t *testing.T) {
	dir := t.TempDir()
	stream, cfg := filepath.Join(dir, "delayed.jsonl"), filepath.Join(dir, "c.yaml")
	if code, _, errOut := run(t, "generate", "-n", "2000", "--seed", "1", "--delay", "20", "--never", "0.05", "-o", stream); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, errOut)
	}
	if err := os.WriteFile(cfg, []byte("labels: {delayed: true, wait: 100}\nlearners:\n  - {name: pct, algorithm: perceptron, bias: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, text, errOut := run(t, "replay", "-c", cfg, stream)
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errOut)
	}
	code, js, errOut := run(t, "replay", "-c", cfg, "--report", "json", stream)
	if code != 0 {
		t.Fatalf("replay --report json: exit %d: %s", code, errOut)
	}
	var rep struct {
		Labels struct {
			Joined, Pending, Expired, Late, Unknown, Duplicate uint64
			Delay                                              struct {
				Max  uint64
				Mean float64
			}
		}
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	l := rep.Labels
	if l.Joined == 0 || l.Expired == 0 {
		t.Fatalf("labels %+v: the stream should join some and let some expire", l)
	}
	want := fmt.Sprintf("labels: joined %d  pending %d  expired %d  late %d  unknown %d  duplicate %d  delay mean %.1f max %d records\n",
		l.Joined, l.Pending, l.Expired, l.Late, l.Unknown, l.Duplicate, l.Delay.Mean, l.Delay.Max)
	if !strings.Contains(text, want) {
		t.Errorf("no %q in the text report:\n%s", want, text)
	}
	// A Perceptron without a margin checks no bound: its certificate is
	// named as one.
	if !regexp.MustCompile(`pct +perceptron .* certificate max_margin <= [0-9.]+ `).MatchString(text) {
		t.Errorf("the Perceptron's certificate is not named as one:\n%s", text)
	}
}
