package config_test

import (
	"testing"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
)

// checkpoint.lease is validated against the bounds the checkpoint package
// enforces (config cannot import it: checkpoint imports config).
func TestLeaseBounds(t *testing.T) {
	if config.MinLease != checkpoint.MinLease || config.MaxLease != checkpoint.MaxLease {
		t.Errorf("config's lease bounds %v..%v, checkpoint's %v..%v", config.MinLease, config.MaxLease, checkpoint.MinLease, checkpoint.MaxLease)
	}
}
