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
	stopped := func() error { return fmt.Errorf("%s: loading stopped: %w", path, context.Cause(ctx)) }
	if ctx.Err() != nil {
		return nil, stopped()
	}
	done := make(chan result, 1)
	go func() {
		cfg, err := config.Load(path)
		done <- result{cfg, err}
	}()
	select {
	case r := <-done:
		if ctx.Err() != nil {
			// The signal came while the load ended: it wins over
			// the load's result or error.
			return nil, stopped()
		}
		return r.cfg, r.err
	case <-ctx.Done():
		return nil, stopped()
	}
}
