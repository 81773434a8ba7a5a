package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
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
			Origin: "kafka cluster kfake topic events"}
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
		"partition 1  position 5000", "events 5000  labeled 5000", r.Learners[0].StateSHA256[:12]} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = run(t, "inspect", "--report", "json", d.File(1))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []inspected
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	if len(got) != 1 || got[0].Partition != 1 || got[0].Position != 5000 || got[0].Report.Events != 5000 ||
		got[0].Format != checkpoint.FormatVersion || got[0].Origin != "kafka cluster kfake topic events" ||
		len(got[0].Report.Learners) != len(r.Learners) || got[0].Report.Learners[3].Mistakes != r.Learners[3].Mistakes {
		t.Errorf("json output: %+v", got)
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
