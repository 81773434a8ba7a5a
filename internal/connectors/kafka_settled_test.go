package connectors

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A member that waited for its group and then owns every partition has
// settled the normal way: said at INFO, not as a warning (an operator
// watching warnings saw one on every such run).
func TestKafkaSettledNotWarned(t *testing.T) {
	var logs bytes.Buffer
	s := &KafkaSource{name: "kafka:t", end: map[int]int64{0: 5, 1: 7}, waitSince: time.Now().Add(-time.Second)}
	s.cfg.Group, s.cfg.Logger = "g", slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	err := s.ending(context.Background(), endDone, &kafkaGen{owned: []int{0, 1}})
	if !errors.Is(err, ErrEndOfInput) {
		t.Fatalf("ending: %v, want the end of input", err)
	}
	out := logs.String()
	if !strings.Contains(out, "level=INFO") || !strings.Contains(out, "settled: this member owns every partition") || strings.Contains(out, "level=WARN") {
		t.Errorf("log:\n%s\nwant the settling at INFO and no warning", out)
	}
}
