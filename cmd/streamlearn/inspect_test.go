package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

// inspect prints the positions and the reports checkpoints hold, as text
// and JSON; a damaged checkpoint is an error naming the file.
func TestInspect(t *testing.T) {
	r := replayJSON(t, "-c", "../../config.yaml", "../../testdata/demo.jsonl")
	rep, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{1, 0} {
		c := &checkpoint.Checkpoint{Created: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), Fingerprint: sha256.Sum256([]byte("cfg")),
			Source: "kafka:events", Partition: p, Position: 4999 + int64(p), State: []byte("state"), Report: rep,
			Origin: "kafka cluster kfake topic events", Consumer: "kafka group gx"}
		if err := d.Save(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := run(t, "inspect", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{fmt.Sprintf("partition-0.ckpt: checkpoint format %d", checkpoint.FormatVersion),
		"source kafka:events  partition 0  position 4999", "of kafka cluster kfake topic events",
		"partition 1  position 5000", "events 5000  labeled 5000", r.Learners[0].StateSHA256[:12], "\nconsumer kafka group gx\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = run(t, "inspect", "--report", "json", d.File(1))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got, err := readInspected([]byte(out))
	if err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	if len(got) != 1 || got[0].Partition != 1 || got[0].Position != 5000 || got[0].Report.Events != 5000 ||
		got[0].Format != checkpoint.FormatVersion || got[0].Origin != "kafka cluster kfake topic events" || got[0].Consumer != "kafka group gx" ||
		len(got[0].Report.Learners) != len(r.Learners) || got[0].Report.Learners[3].Mistakes != r.Learners[3].Mistakes {
		t.Errorf("json output: %+v", got)
	}
	// JSON Lines, as every --report json: a checkpoint a line.
	code, out, errOut = run(t, "inspect", "--report", "json", dir)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("inspect --report json of 2 checkpoints: exit %d, %d lines, want 2: %s%s", code, len(lines), out, errOut)
	}
	for i, line := range lines {
		var in inspected
		if err := json.Unmarshal([]byte(line), &in); err != nil || in.Partition != int32(i) {
			t.Errorf("line %d: %v, partition %d; want checkpoint %d's object: %s", i+1, err, in.Partition, i, line)
		}
	}

	b, err := os.ReadFile(d.File(0))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(d.File(0), b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(t, "inspect", dir)
	if code != 1 || !strings.Contains(errOut, filepath.Join(dir, "partition-0.ckpt")) || !strings.Contains(errOut, "corrupt") {
		t.Errorf("damaged checkpoint: exit %d, %q; want 1 and an error naming the file", code, errOut)
	}
	if code, _, _ := run(t, "inspect"); code != 2 {
		t.Errorf("no argument: exit %d, want 2", code)
	}
}

// inspect -c recomputes a checkpoint's report from its state: counts and
// digests that agree are marked verified, a report that does not match
// its state is an error naming the learner; a checkpoint copied over
// another partition's file, or one counting more events than its position
// leaves room for, is an error saying so.
func TestInspectVerifies(t *testing.T) {
	cfg, err := config.Load("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := event.NewDecoder(pipeline.EventConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	for line := range bytes.Lines(data) {
		if err := dec.Decode(bytes.TrimSpace(line), &ev); err != nil {
			t.Fatal(err)
		}
		p.Process(&ev)
	}
	state, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	report, err := p.Report()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	save := func(name string, partition int32, position int64, rep pipeline.Report) string {
		t.Helper()
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		c := &checkpoint.Checkpoint{Created: time.Now(), Fingerprint: service.Fingerprint(cfg), Source: "kafka:events",
			Partition: partition, Position: position, State: state, Report: b}
		raw, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := save("partition-0.ckpt", 0, 4999, report)
	code, out, errOut := run(t, "inspect", "-c", "../../config.yaml", good)
	if code != 0 || !strings.Contains(out, "report verified") {
		t.Fatalf("inspect -c of a sound checkpoint: exit %d, %s%s", code, out, errOut)
	}
	if code, out, _ := run(t, "inspect", good); code != 0 || !strings.Contains(out, "report as saved: give -c CONFIG") {
		t.Errorf("inspect without -c: exit %d, want 0 and a report marked as saved:\n%s", code, out)
	}

	lying := report
	lying.Learners = slices.Clone(report.Learners)
	lying.Learners[1].Mistakes--
	path := save("lying.ckpt", 0, 4999, lying)
	if code, _, errOut := run(t, "inspect", "-c", "../../config.yaml", path); code != 1 ||
		!strings.Contains(errOut, "learner "+report.Learners[1].Name) || !strings.Contains(errOut, "lying.ckpt") {
		t.Errorf("a report its state contradicts: exit %d, %q; want 1 naming the file and learner %s", code, errOut, report.Learners[1].Name)
	}
	yml, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	otherPath := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(otherPath, bytes.Replace(yml, []byte("bits: 18"), []byte("bits: 12"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "inspect", "-c", otherPath, good); code != 1 || !strings.Contains(errOut, "another model configuration") {
		t.Errorf("-c of another configuration: exit %d, %q", code, errOut)
	}

	path = save("partition-3.ckpt", 0, 4999, report)
	if code, _, errOut := run(t, "inspect", path); code != 1 || !strings.Contains(errOut, "the file name says partition 3, the checkpoint holds partition 0") {
		t.Errorf("partition 0 in partition 3's file: exit %d, %q", code, errOut)
	}
	path = save("partition-5.ckpt", 5, 100, report)
	if code, _, errOut := run(t, "inspect", path); code != 1 || !strings.Contains(errOut, "counted 5000 events, but position 100 of kafka:events leaves room for 101") {
		t.Errorf("5000 events at position 100: exit %d, %q", code, errOut)
	}
}

// readInspected reads `inspect --report json`: JSON Lines, a checkpoint
// a line. A line that is not one JSON object is an error.
func readInspected(out []byte) ([]inspected, error) {
	var got []inspected
	for i, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		var in inspected
		if err := json.Unmarshal(line, &in); err != nil {
			return got, fmt.Errorf("line %d: %w", i+1, err)
		}
		got = append(got, in)
	}
	return got, nil
}
