package connectors

import (
	"testing"

	"github.com/streamlearn/streamlearn/internal/testproc"
)

// TestMain gives the tests a TMPDIR folder that goes with the test binary
// however it ends, and the processes they start (testproc).
func TestMain(m *testing.M) { testproc.Main(m) }
