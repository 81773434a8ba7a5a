package service

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
)

// A model made afresh is logged as a new model; one restored from its
// checkpoint is logged as restored, and not also as a new model.
func TestNewModelLogged(t *testing.T) {
	c := loadExampleConfig(t)
	store, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	events := genEvents(500, 3, 0, 0, 0)
	for i, want := range []struct{ has, hasNot string }{
		{`msg="new model"`, "model restored from checkpoint"},
		{"model restored from checkpoint", `msg="new model"`},
	} {
		var logs strings.Builder
		src := newMemSource(events, 1)
		s := newService(t, Options{Config: c, Source: src, Checkpoints: store, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		run(t, s)
		out := logs.String()
		if !strings.Contains(out, want.has) || strings.Contains(out, want.hasNot) {
			t.Errorf("run %d: want %q and no %q in the log:\n%s", i+1, want.has, want.hasNot, out)
		}
	}
}
