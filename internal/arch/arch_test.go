package arch

import (
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
	learn := append([]string{"internal/config", "internal/pipeline", "go.yaml.in/yaml/"}, decode...)
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
