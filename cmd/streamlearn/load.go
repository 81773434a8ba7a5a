package main

import (
	"context"
	"fmt"

	"github.com/streamlearn/streamlearn/internal/config"
)

// loadConfig is config.Load, given up when ctx is done (SIGINT, SIGTERM):
// a command exits at once whatever the file makes the loading do. The
// loading goroutine is left to finish; the process exits.
func loadConfig(ctx context.Context, path string) (*config.Config, error) {
	type result struct {
		cfg *config.Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		cfg, err := config.Load(path)
		done <- result{cfg, err}
	}()
	select {
	case r := <-done:
		return r.cfg, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: loading stopped: %w", path, context.Cause(ctx))
	}
}
