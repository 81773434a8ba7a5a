package config

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// modelJSON is what the configuration fingerprint of a model is taken of
// (pipeline.Fingerprint), and every label setting besides.
func modelJSON(t *testing.T, c *Config) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Input    Input
		Features Features
		Learners []Learner
		Answer   string
		Labels   Labels
	}{c.Input, c.Features, c.Learners, c.Answer, c.Labels})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestModelYAML: the model sections of every configuration of the repo,
// written by ModelYAML, read back into the same input, features,
// learners and labels, and are written again byte for byte; nothing of
// the source, sinks, HTTP API or checkpoints is in them.
func TestModelYAML(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yaml")
	examples, _ := filepath.Glob("../../examples/*.yaml")
	files = append(files, examples...)
	files = append(files, "../../config.yaml", "../../deploy/streamlearn.yaml", "../../testdata/default-label.yaml")
	cfgs := map[string]*Config{"default": Default()}
	// adaboost-ol's weak learner: its keys are decoded by hand (no yaml tags)
	weak, err := Parse("weak.yaml", []byte("learners:\n  - {name: boost, algorithm: adaboost-ol, weak_learners: 3, weak: {algorithm: ogd, eta: 0.1, bias: true}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfgs["weak.yaml"] = weak
	for _, f := range files {
		c, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		cfgs[f] = c
	}
	for name, c := range cfgs {
		y, err := c.ModelYAML()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back, err := Parse(name+" (model sections)", y)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, y)
		}
		if got, want := modelJSON(t, back), modelJSON(t, c); got != want {
			t.Errorf("%s: read back\n%s\nwant\n%s\nfrom\n%s", name, got, want, y)
		}
		again, err := back.ModelYAML()
		if err != nil || string(again) != string(y) {
			t.Errorf("%s: written again (%v):\n%s\nfirst:\n%s", name, err, again, y)
		}
		for _, key := range []string{"source:", "sinks:", "http:", "checkpoint:", "models:", "token_file", "brokers"} {
			if strings.Contains(string(y), key) {
				t.Errorf("%s: the model sections hold %s:\n%s", name, key, y)
			}
		}
		if d, err := ModelDifference(c, back, "A", "B"); err != nil || d != "" {
			t.Errorf("%s: a difference with itself read back: %q (%v)", name, d, err)
		}
	}
}

// TestModelDifference names the first key of the model sections that
// differs, with both values.
// TestUseModelOf: a configuration given another's model sections is of
// its model (ModelDifference finds none, whatever ModelSections holds),
// and keeps where it runs.
func TestUseModelOf(t *testing.T) {
	m, err := Load("../../examples/sms-spam.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := Default()
	c.HTTP.Addr = "127.0.0.1:9"
	c.UseModelOf(m)
	if d, err := ModelDifference(m, c, "m", "c"); err != nil || d != "" {
		t.Errorf("after UseModelOf: %q (%v)", d, err)
	}
	if c.AnswerName() != "ada" || c.HTTP.Addr != "127.0.0.1:9" || c.Source.Kind != Default().Source.Kind {
		t.Errorf("after UseModelOf: answer %q, http %q, source %q", c.AnswerName(), c.HTTP.Addr, c.Source.Kind)
	}
	a, _ := m.ModelYAML()
	b, _ := c.ModelYAML()
	if string(a) != string(b) {
		t.Errorf("model sections after UseModelOf:\n%s\nwant\n%s", b, a)
	}
}

func TestModelDifference(t *testing.T) {
	a := Default()
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Learners[1].Params.(*online.AdaGradConfig).Eta = 0.5 }, "learners[1] (adagrad).eta: unset in file.slm, 0.5 in b.yaml"},
		{func(c *Config) { c.Features.Bits = 20 }, "features.bits: 18 in file.slm, 20 in b.yaml"},
		{func(c *Config) { c.Learners = c.Learners[:1] }, "learners[1] (adagrad): {name: adagrad, algorithm: adagrad, bias: true, normalized: false} in file.slm, unset in b.yaml"},
		{func(c *Config) { c.Input.Positive = []string{"spam"} }, "input.positive: unset in file.slm, [spam] in b.yaml"},
		{func(c *Config) { c.Learners[0].Calibrate = true }, "learners[0] (perceptron).calibrate: unset in file.slm, true in b.yaml"},
		{func(c *Config) { c.HTTP.Addr = ":9090"; c.Source.Kind = "kafka" }, ""},
		{func(c *Config) { c.Answer = "adagrad" }, ""}, // what is served, not the model
	} {
		b, err := Parse("b.yaml", mustModelYAML(t, a))
		if err != nil {
			t.Fatal(err)
		}
		tc.change(b)
		if got, err := ModelDifference(a, b, "file.slm", "b.yaml"); err != nil || got != tc.want {
			t.Errorf("got %q (%v), want %q", got, err, tc.want)
		}
	}
}

func mustModelYAML(t *testing.T, c *Config) []byte {
	t.Helper()
	y, err := c.ModelYAML()
	if err != nil {
		t.Fatal(err)
	}
	return y
}
