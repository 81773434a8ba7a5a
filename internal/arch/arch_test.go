package arch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/testproc"
)

const module = "github.com/streamlearn/streamlearn/"

// TestDependenciesPointOneWay lists, with `go list -deps`, every package
// each of these packages depends on, and fails on one outside its rule.
func TestDependenciesPointOneWay(t *testing.T) {
	core := []string{"internal/codec", "internal/online", "internal/experts", "internal/boost", "internal/regret", "internal/learners", "gonum.org/"}
	decode := append([]string{"internal/event"}, core...)
	learn := append([]string{"internal/config", "internal/pipeline", "go.yaml.in/yaml/", "internal/connectors/settings"}, decode...)
	// The broker clients (kafka-go, nats.go, the embedded nats-server) and
	// what they import.
	clients := []string{"github.com/segmentio/", "github.com/nats-io/", "github.com/klauspost/", "github.com/pierrec/",
		"github.com/xdg-go/", "github.com/minio/", "github.com/antithesishq/", "golang.org/x/"}
	connect := append([]string{"internal/connectors/settings", "internal/lockfile"}, clients...)
	store := []string{"internal/codec", "internal/lockfile", "github.com/nats-io/nats.go", "github.com/nats-io/nkeys", "github.com/nats-io/nuid",
		"github.com/klauspost/", "golang.org/x/"}
	service := append([]string{"internal/service/", "internal/serving", "internal/checkpoint", "internal/connectors", "internal/lockfile"}, append(learn, clients...)...)
	for _, rule := range []struct {
		pkg     string
		allowed []string // import path prefixes (module-relative for ours) besides the standard library
	}{
		{"internal/codec", nil},
		{"internal/online", core},
		{"internal/experts", core},
		{"internal/boost", core},
		{"internal/regret", core},
		{"internal/learners", core},
		{"internal/event", decode},
		{"internal/config", learn},
		{"internal/pipeline", learn},
		{"internal/connectors/settings", nil},
		{"internal/connectors", connect},
		{"internal/checkpoint", store},
		{"internal/service", service},
		// serving: the models' copies and the checkpoint stores they are
		// read from, never the service that learns them, the HTTP API,
		// a connector or Prometheus.
		{"internal/serving", append([]string{"internal/checkpoint"}, append(learn, store...)...)},
	} {
		out, err := testproc.Command(t, "go", "list", "-deps", "-f", "{{.Standard}} {{.ImportPath}}", module+rule.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", rule.pkg, err)
		}
		for line := range strings.Lines(string(out)) {
			std, path, _ := strings.Cut(strings.TrimSpace(line), " ")
			if std == "true" || path == module+rule.pkg {
				continue
			}
			ok := false
			for _, a := range rule.allowed {
				ok = ok || strings.HasPrefix(path, a) || strings.HasPrefix(path, module+a)
			}
			if !ok {
				t.Errorf("%s depends on %s, outside its rule (see the package doc)", rule.pkg, path)
			}
		}
	}
}

// TestProcessesThroughTestproc: a test starts its processes with
// internal/testproc, which ends them (and their own children) with the
// test binary however it ends; an exec.Command of its own would outlive a
// killed or timed-out test binary. Only testproc itself calls os/exec's
// constructors in a test file or a test helper package.
func TestProcessesThroughTestproc(t *testing.T) {
	out, err := testproc.Command(t, "git", "-C", "../..", "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout?)", err)
	}
	ctor := "exec." + "Command" // not spelled whole, or this file would match
	var checked int
	for name := range strings.Lines(string(out)) {
		name = strings.TrimSpace(name)
		helper := strings.HasPrefix(name, "internal/testbroker/") || strings.HasPrefix(name, "internal/connectors/sourcetest/") ||
			strings.HasPrefix(name, "internal/online/onlinetest/")
		if !strings.HasSuffix(name, "_test.go") && !helper || strings.HasPrefix(name, "internal/testproc/") {
			continue
		}
		src, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for i, line := range strings.Split(string(src), "\n") {
			if strings.Contains(line, ctor+"(") || strings.Contains(line, ctor+"Context(") {
				t.Errorf("%s:%d: starts a process with os/exec; use testproc.Command, which ends it with the test binary", name, i+1)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("%d test files checked: the listing is not the repository's", checked)
	}
}
