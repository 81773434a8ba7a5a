package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputIsInput: an output given the path of an input is refused at
// start, exit 1, naming both, and the input is left as it was: run's file
// sink on its file source's path (or a link to it), replay's
// --dead-letters, --plot or --junit on one of its input files. (Before,
// run appended its dead letters to the file it followed, which it read
// back as records forever, and replay appended to its own input.)
func TestOutputIsInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "loop.jsonl")
	const content = "{\"features\":{\"v\":0.5},\"label\":1}\n{\"features\":\n{\"features\":{\"v\":0.1},\"label\":0}\n{\"torn\""
	if err := os.WriteFile(in, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, config string
		args         []string
		want         string
	}{
		{"run dead letters", "sinks: {dead_letters: {kind: file, path: " + in + "}}", []string{"run", "--until-end", "--http", "off"},
			"sinks.dead_letters: file sink " + in + " is the source's file " + in + ": "},
		{"run predictions through a link", "sinks: {predictions: {kind: file, path: " + link + "}}", []string{"run", "--until-end", "--http", "off"},
			"sinks.predictions: file sink " + link + " is the source's file " + in + ": "},
		{"run relative path", "sinks: {reports: {kind: file, path: " + filepath.Join(dir, ".", "x", "..", "loop.jsonl") + "}}", []string{"run", "--until-end", "--http", "off"},
			"sinks.reports: file sink "},
		{"replay --dead-letters", "", []string{"replay", "--dead-letters", link, "x.jsonl", in},
			"replay: --dead-letters " + link + " is the input " + in + ": "},
		{"replay dead_letters of the config", "sinks: {dead_letters: {kind: file, path: " + in + "}}", []string{"replay", in},
			"replay: --dead-letters " + in + " is the input " + in + ": "},
		{"replay --junit", "", []string{"replay", "--junit", in, in}, "replay: --junit " + in + " is the input " + in + ": "},
		{"replay --plot", "", []string{"replay", "--plot", in, in}, "replay: --plot " + in + " is the input " + in + ": "},
	} {
		cfg := filepath.Join(t.TempDir(), "c.yaml")
		body := "learners:\n  - {name: maj, algorithm: majority}\nsource: {kind: file, path: " + in + "}\n" + c.config + "\n"
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{c.args[0], "-c", cfg}, c.args[1:]...)
		code, _, errOut := run(t, args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and %q", c.name, code, errOut, c.want)
		}
		if b, err := os.ReadFile(in); err != nil || string(b) != content {
			t.Fatalf("%s: the input holds %q, %v; want it untouched", c.name, b, err)
		}
	}
}
