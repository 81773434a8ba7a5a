package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/learners"
	"github.com/streamlearn/streamlearn/internal/online"
)

func TestGoodConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yaml")
	examples, _ := filepath.Glob("../../examples/*.yaml")
	files = append(append(files, examples...), "../../config.yaml")
	if len(files) < 3 {
		t.Fatalf("found only %d good configs", len(files))
	}
	for _, f := range files {
		c, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(c.Learners) == 0 || c.Features.Bits == 0 {
			t.Errorf("%s: defaults not filled: %+v", f, c)
		}
	}
}

func TestAllLearnersConfig(t *testing.T) {
	c, err := Load("testdata/good/all_learners.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Features.Bits != 20 || c.Features.Scale != "standard" || c.Features.Text.NGrams != 2 {
		t.Errorf("features = %+v", c.Features)
	}
	if got := len(c.Learners); got != 9 {
		t.Fatalf("%d learners, want 9", got)
	}
	if l, ok := c.Learners[2].Params.(*online.OGDConfig); !ok || l.Loss != "logistic" || l.Eta != 0.5 || l.Schedule != "fixed" || l.Radius != 10 || !l.Bias {
		t.Errorf("ogd = %+v", c.Learners[2].Params)
	}
	if l, ok := c.Learners[6].Params.(*learners.ClassParams); !ok || l.Class == nil || len(l.Class.Hypotheses) != 2 || len(l.Class.Domain) != 3 {
		t.Errorf("table class = %+v", c.Learners[6].Params)
	}
	if s := c.Sinks.Reports; s == nil || s.Every != 1000 || s.Interval.Seconds() != 10 {
		t.Errorf("reports sink = %+v", s)
	}
	if got := c.Input.Positive; len(got) != 1 || got[0] != "UP" {
		t.Errorf("positive = %q", got)
	}
	if c.Input.MaxAbsValue != 1e6 || c.HTTP.TokenFile != "/run/secrets/streamlearn-http-token" {
		t.Errorf("max_abs_value %g, http.token_file %q", c.Input.MaxAbsValue, c.HTTP.TokenFile)
	}
}

// Every error names the file, the line and the key at fault.
func TestBadConfigs(t *testing.T) {
	cases := []struct {
		file string
		want string // the whole message, or its start when it ends in "..."
	}{
		{"unknown_top.yaml", "testdata/bad/unknown_top.yaml:3: lerners: unknown key: did you mean learners? (known keys here: answer, checkpoint, features, http, input, labels, learners, models, sinks, source)"},
		{"unknown_nested.yaml", "testdata/bad/unknown_nested.yaml:3: features.scal: unknown key: did you mean scale? (known keys here: bits, dense, scale, text)"},
		{"key_not_for_algorithm.yaml", "testdata/bad/key_not_for_algorithm.yaml:4: learners[0].class: not used by algorithm perceptron (its keys: bias, average, margin)"},
		{"unknown_algorithm.yaml", `testdata/bad/unknown_algorithm.yaml:2: learners[0].algorithm: "perceptorn" is not one of adaboost-ol, adagrad, consistent, halving, kernel-perceptron, last-label, majority, multiclass-perceptron, ogd, pegasos, perceptron, soa, weighted-majority: did you mean perceptron?`},
		{"baseline_key.yaml", "testdata/bad/baseline_key.yaml:3: learners[0].bias: not used by algorithm majority (its keys: none)"},
		{"duplicate_name.yaml", `testdata/bad/duplicate_name.yaml:3: learners[1].name: "a" is also the name of learners[0]`},
		{"bad_type.yaml", "testdata/bad/bad_type.yaml:2: features.bits: cannot unmarshal !!str `many` into uint"},
		{"learner_bad_type.yaml", "testdata/bad/learner_bad_type.yaml:5: learners[1].eta: cannot unmarshal !!str `fast` into float64"},
		{"connect_timeout.yaml", "testdata/bad/connect_timeout.yaml:2: source.connect_timeout: -1s is outside 0..10m (0: the default, 5s)"},
		{"embedded_tls.yaml", "testdata/bad/embedded_tls.yaml:1: source.tls: not a key of an embedded server (its keys: port, store_dir, subject, stream, durable, start, connect_timeout)"},
		{"start_file.yaml", "testdata/bad/start_file.yaml:5: source.start: latest: a file source reads from its first record (start is for Kafka and JetStream sources)"},
		{"start_offset.yaml", `testdata/bad/start_offset.yaml:6: source.start: "offset:-3": the offset must be a whole number ≥ 0`},
		{"flow_bad_type.yaml", "testdata/bad/flow_bad_type.yaml:1: learners[0].eta: cannot unmarshal !!str `fast` into float64"},
		{"source_kind.yaml", `testdata/bad/source_kind.yaml:1: source.kind: "carrier" is not one of kafka, nats, jetstream, file, embedded (or absent)`},
		{"embedded_url.yaml", "testdata/bad/embedded_url.yaml:1: source.url: an embedded server runs in this process: give port (and store_dir), not url or brokers"},
		{"bits_range.yaml", "testdata/bad/bits_range.yaml:2: features.bits: 40 is outside 1..24"},
		{"bits_memory.yaml", "testdata/bad/bits_memory.yaml:2: features.bits: 26 is outside 1..24: 2^26 slots take 512 MiB per weight vector, and a model's checkpoint must fit in 1 GiB"},
		{"expert_unknown.yaml", `testdata/bad/expert_unknown.yaml:3: learners[1].experts[1]: "b" is not a learner configured before this one`},
		{"no_learners.yaml", "testdata/bad/no_learners.yaml: learners: configure at least one learner"},
		{"soa_no_class.yaml", "testdata/bad/soa_no_class.yaml:2: learners[0].class: soa needs a hypothesis class"},
		{"ogd_loss.yaml", `testdata/bad/ogd_loss.yaml:2: learners[0].loss: unknown loss "hnge" (want hinge, logistic or squared)`},
		// yaml.v3 names the line where the enclosing block (learners:) starts.
		{"syntax.yaml", "testdata/bad/syntax.yaml:1: did not find expected ',' or '}'"},
		{"class_points.yaml", "testdata/bad/class_points.yaml:2: learners[0].class.points: ..."},
		{"boost_weak_key.yaml", "testdata/bad/boost_weak_key.yaml:4: learners[0].weak.eta: not used by algorithm perceptron (its keys: bias, average, margin)"},
		{"boost_weak_class.yaml", "testdata/bad/boost_weak_class.yaml:4: learners[0].weak.algorithm: halving cannot be a weak learner: boosting takes learners of feature vectors (adagrad, kernel-perceptron, last-label, majority, ogd, pegasos, perceptron)"},
		{"boost_weak_invalid.yaml", `testdata/bad/boost_weak_invalid.yaml:4: learners[0].weak.loss: unknown loss "hnge" (want hinge, logistic or squared)`},
		{"boost_count.yaml", "testdata/bad/boost_count.yaml:4: learners[0].weak_learners: 65 is outside 1..64 (0: 10)"},
		{"boost_self_alias.yaml", `testdata/bad/boost_self_alias.yaml:1: anchor "w" contains itself`},
		{"boost_weak_merge.yaml", "testdata/bad/boost_weak_merge.yaml:4: learners[0].weak.lose: not used by algorithm ogd (its keys: loss, eta, schedule, radius, bias, bias_eta)"},
		{"boost_weak_scalar.yaml", "testdata/bad/boost_weak_scalar.yaml:4: learners[0].weak: want a mapping of keys (algorithm and its keys)"},
		{"sink_kind.yaml", `testdata/bad/sink_kind.yaml:4: sinks.reports.kind: "carrier-pigeon" is not one of kafka, nats, jetstream, file`},
		{"max_abs_value.yaml", "testdata/bad/max_abs_value.yaml:2: input.max_abs_value: 1e+300 is outside [1, 1e100]"},
		{"session_not_kafka.yaml", `testdata/bad/session_not_kafka.yaml:6: source.session_timeout: tunes a Kafka consumer group; source.kind is "jetstream"`},
		{"backoff_negative.yaml", "testdata/bad/backoff_negative.yaml:6: source.join_group_backoff: must not be negative"},
		// A key without a default that run needs is missing: check says
		// so, at the line of its block, before run is started.
		{"source_topic.yaml", "testdata/bad/source_topic.yaml:2: source.topic: a Kafka source needs a topic"},
		{"source_brokers.yaml", "testdata/bad/source_brokers.yaml:2: source.brokers: a Kafka source needs brokers (host:port, such as [127.0.0.1:9092])"},
		{"source_path.yaml", "testdata/bad/source_path.yaml:2: source.path: a file source needs a path"},
		{"sink_topic.yaml", "testdata/bad/sink_topic.yaml:4: sinks.predictions.topic: a Kafka sink needs a topic"},
		{"sink_stream.yaml", "testdata/bad/sink_stream.yaml:3: sinks.reports.stream: a JetStream sink needs a stream"},
		{"max_bytes.yaml", "testdata/bad/max_bytes.yaml:2: input.max_bytes: 1000000000 is above 67108864 (64 MiB): a record of that size is held in memory whole, by every reader"},
		{"on_mismatch.yaml", `testdata/bad/on_mismatch.yaml:5: checkpoint.on_mismatch: "rebuild-it" is not one of fail, reset, accept, rebuild`},
		{"own_wait.yaml", "testdata/bad/own_wait.yaml:5: checkpoint.own_wait: must not be negative"},
		{"lease_range.yaml", "testdata/bad/lease_range.yaml:6: checkpoint.lease: 30s is not between 1s and 10s"},
		{"lease_dir.yaml", "testdata/bad/lease_dir.yaml:5: checkpoint.lease: a lease is how a bucket's partitions are owned: set it with bucket (a directory is owned by a lock, released when its process dies)"},
		{"labels_wait.yaml", "testdata/bad/labels_wait.yaml:5: labels.wait: -5: want at least 1 record"},
		{"labels_default.yaml", `testdata/bad/labels_default.yaml:5: labels.default_label: label "maybe": want 1, 0, -1, true, false or a configured positive or negative value`},
		{"labels_not_delayed.yaml", "testdata/bad/labels_not_delayed.yaml:3: labels: wait, max_pending and default_label need delayed: true"},
		// A value of the wrong shape names its key, as every error does.
		{"experts_mapping.yaml", "testdata/bad/experts_mapping.yaml:6: learners[1].experts: want a list of strings, got a mapping"},
		{"negative_nested.yaml", "testdata/bad/negative_nested.yaml:2: input.negative[1]: want a string, got a list"},
		{"positive_scalar.yaml", `testdata/bad/positive_scalar.yaml:2: input.positive: want a list of strings, got a single value "UP"`},
		// 0 is not taken for the default, nor for no bound.
		{"models_max_bytes_zero.yaml", "testdata/bad/models_max_bytes_zero.yaml:4: models.max_bytes: 0 is no bound: leave the key out for the default, 536870912 (512 MiB), or give the bytes of models per key a partition keeps resident (there is no unbounded setting)"},
	}
	for _, tc := range cases {
		_, err := Load(filepath.Join("testdata/bad", tc.file))
		if err == nil {
			t.Errorf("%s: loaded without error", tc.file)
			continue
		}
		got := err.Error()
		if prefix, ok := strings.CutSuffix(tc.want, "..."); ok {
			if !strings.HasPrefix(got, prefix) {
				t.Errorf("%s:\n got %s\nwant %s", tc.file, got, tc.want)
			}
		} else if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.file, got, tc.want)
		}
		if strings.Contains(got, "\n") {
			t.Errorf("%s: error spans lines: %q", tc.file, got)
		}
	}
	entries, _ := os.ReadDir("testdata/bad")
	if len(entries) != len(cases) {
		t.Errorf("testdata/bad has %d files; every one needs a row above", len(entries))
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c.Features.Bits != DefaultBits || len(c.Learners) != 2 || c.Input.MaxAbsValue != DefaultMaxAbsValue {
		t.Errorf("default = %+v", c)
	}
}

// TestLearnerFingerprintJSON: a learner's JSON, which the configuration
// fingerprint of every checkpoint hashes, has the flat shape it had before
// the algorithm registry, byte for byte, so that checkpoints written then
// are restored now; a baseline's has its name and algorithm.
func TestLearnerFingerprintJSON(t *testing.T) {
	c, err := Parse("fp.yaml", []byte(`learners:
  - {name: p, algorithm: perceptron, bias: true, margin: 0.5}
  - {name: o, algorithm: ogd, loss: logistic, eta: 0.5, schedule: fixed, bias: true}
  - {name: s, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 3}}
  - {name: w, algorithm: weighted-majority, experts: [p, o], horizon: 100, seed: 7}
  - {name: m, algorithm: majority}
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(c.Learners)
	if err != nil {
		t.Fatal(err)
	}
	const empty = `"Bias":false,"Average":false,"Margin":0,"Loss":"","Eta":0,"Schedule":"","Radius":0,"BiasEta":0,"Class":null,"Experts":null,"Horizon":0,"Seed":0`
	want := `[{"Name":"p","Algorithm":"perceptron","Bias":true,"Average":false,"Margin":0.5,"Loss":"","Eta":0,"Schedule":"","Radius":0,"BiasEta":0,"Class":null,"Experts":null,"Horizon":0,"Seed":0},` +
		`{"Name":"o","Algorithm":"ogd","Bias":true,"Average":false,"Margin":0,"Loss":"logistic","Eta":0.5,"Schedule":"fixed","Radius":0,"BiasEta":0,"Class":null,"Experts":null,"Horizon":0,"Seed":0},` +
		`{"Name":"s","Algorithm":"soa","Bias":false,"Average":false,"Margin":0,"Loss":"","Eta":0,"Schedule":"","Radius":0,"BiasEta":0,"Class":` + classJSON(t, c) + `,"Experts":null,"Horizon":0,"Seed":0},` +
		`{"Name":"w","Algorithm":"weighted-majority","Bias":false,"Average":false,"Margin":0,"Loss":"","Eta":0,"Schedule":"","Radius":0,"BiasEta":0,"Class":null,"Experts":["p","o"],"Horizon":100,"Seed":7},` +
		`{"Name":"m","Algorithm":"majority",` + empty + `}]`
	if string(got) != want {
		t.Errorf("learners JSON\n got %s\nwant %s", got, want)
	}
}

func classJSON(t *testing.T, c *Config) string {
	b, err := json.Marshal(c.Learners[2].Params.(*learners.ClassParams).Class)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBoostWeak: adaboost-ol's weak learner decodes into its algorithm's
// parameters, with defaults where keys are absent, and its keys count in
// the learner's JSON (so in the configuration fingerprint).
func TestBoostWeak(t *testing.T) {
	c, err := Parse("b.yaml", []byte(`learners:
  - name: b
    algorithm: adaboost-ol
    weak_learners: 4
    weak: {algorithm: ogd, loss: hinge, eta: 0.25}
  - {name: d, algorithm: adaboost-ol}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Learners[0].Params.(*learners.AdaBoostParams)
	o, ok := p.Weak.Params.(*online.OGDConfig)
	if p.WeakLearners != 4 || p.Weak.Algorithm != "ogd" || !ok || o.Loss != "hinge" || o.Eta != 0.25 {
		t.Fatalf("params %+v, weak %+v", p, p.Weak.Params)
	}
	if d := c.Learners[1].Params.(*learners.AdaBoostParams); d.Weak != nil || d.WeakLearners != 0 {
		t.Errorf("defaults %+v", d)
	}
	j, err := json.Marshal(c.Learners[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(j), `"Weak":{"algorithm":"ogd","params":{"Loss":"hinge","Eta":0.25`) || !strings.Contains(string(j), `"WeakLearners":4`) {
		t.Errorf("JSON %s", j)
	}
}

// Several classes: what cannot go with them is refused, naming the key.
func TestClassesRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"input: {classes: [a]}\nlearners: [{name: p, algorithm: perceptron}]\n", "input.classes: 1 classes: want 2 to 127"},
		{"input: {classes: [a, b, a]}\nlearners: [{name: p, algorithm: perceptron}]\n", `input.classes[2]: "a" is also input.classes[0]`},
		{"input: {classes: [a, b], positive: [a]}\nlearners: [{name: p, algorithm: perceptron}]\n", "input.classes: set classes, or positive and negative labels, not both"},
		{"input: {classes: [a, b]}\nlabels: {delayed: true}\nlearners: [{name: p, algorithm: perceptron}]\n", "labels.delayed needs two classes"},
		{"input: {classes: [a, b]}\nlearners: [{name: p, algorithm: perceptron, calibrate: true}]\n", "learners[0].calibrate"},
		{"input: {classes: [a, b]}\nlearners: [{name: p, algorithm: perceptron}, {name: w, algorithm: weighted-majority, experts: [p]}]\n", "learners[1].experts"},
		{"learners: [{name: m, algorithm: multiclass-perceptron}]\n", "learners[0].algorithm: multiclass-perceptron predicts one of several classes: list them in input.classes"},
		{"input: {classes: [a, \"b c\"]}\nlearners: [{name: p, algorithm: perceptron}]\n", `input.classes[1]: "b c": a class name has no blank`},
		{"models: {global: true}\nlearners: [{name: p, algorithm: perceptron}]\n", "models.global: a global model beside the models per key: set models.by: key"},
		{"models: {max_bytes: 1000}\nlearners: [{name: p, algorithm: perceptron}]\n", "models.max_bytes: bounds the memory of the models per key: set models.by: key"},
		{"models: {by: key, max_bytes: -1}\nlearners: [{name: p, algorithm: perceptron}]\n", "models.max_bytes: must not be negative"},
	} {
		_, err := Parse("c.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := Parse("c.yaml", []byte("input: {classes: [a, b, c]}\nlearners: [{name: m, algorithm: multiclass-perceptron}, {name: p, algorithm: perceptron}]\n")); err != nil {
		t.Error(err)
	} // Models per key are bounded in bytes by default, not in models.
	c, err := Parse("c.yaml", []byte("models: {by: key}\nlearners: [{name: p, algorithm: perceptron}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Models.MaxBytes != DefaultModelsMaxBytes || c.Models.Max != 0 {
		t.Errorf("models by key: max_bytes %d, max %d, want %d and none", c.Models.MaxBytes, c.Models.Max, DefaultModelsMaxBytes)
	}
}

// The client knobs of sources and sinks decode, and are refused on a
// client they do not tune, negative, or out of their values.
func TestTuningKeys(t *testing.T) {
	const learner = "learners: [{name: p, algorithm: perceptron}]\n"
	c, err := Parse("c.yaml", []byte(learner+`source: {kind: kafka, brokers: ["b:9092"], topic: t, max_wait: 50ms, min_bytes: 10, max_bytes: 2048, commit_every: 10, commit_interval: 5ms}
sinks:
  predictions: {kind: kafka, topic: p, batch_timeout: 1ms, batch_size: 50, required_acks: one, compression: zstd}
  reports: {kind: jetstream, url: "nats://n:4222", stream: R, subject: r, publish_window: 64}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, p := c.Source, c.Sinks.Predictions
	if s.MaxWait != 50*time.Millisecond || s.MinBytes != 10 || s.MaxBytes != 2048 || s.CommitEvery != 10 || s.CommitInterval != 5*time.Millisecond ||
		p.BatchTimeout != time.Millisecond || p.BatchSize != 50 || p.RequiredAcks != "one" || p.Compression != "zstd" || c.Sinks.Reports.PublishWindow != 64 {
		t.Errorf("decoded %+v and %+v", s, p)
	}
	if _, err := Parse("c.yaml", []byte(learner+"source: {kind: jetstream, url: \"nats://n:4222\", stream: S, subject: s, fetch_batch: 10, fetch_wait: 2s, ack_batch: 10, max_ack_pending: 100000}\n")); err != nil {
		t.Error(err)
	}
	if c, err := Parse("c.yaml", []byte(learner+"sinks: {predictions: {kind: kafka, brokers: [\"b:9092\"], topic: p, create: true, partitions: 12, replication: 3, retention: 168h}}\n")); err != nil {
		t.Error(err)
	} else if p := c.Sinks.Predictions; !p.Create || p.Partitions != 12 || p.Replication != 3 || p.Retention != 168*time.Hour {
		t.Errorf("decoded %+v", p)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"source: {kind: jetstream, url: \"nats://n:4222\", stream: S, subject: s, max_wait: 1ms}\n", "source.max_wait: tunes a kafka client"},
		{"source: {kind: kafka, brokers: [\"b:9092\"], topic: t, fetch_batch: 1}\n", "source.fetch_batch: tunes a jetstream or embedded client"},
		{"source: {kind: kafka, brokers: [\"b:9092\"], topic: t, min_bytes: 10, max_bytes: 5}\n", "source.min_bytes: 10 exceeds max_bytes 5"},
		{"source: {kind: jetstream, url: \"nats://n:4222\", stream: S, subject: s, fetch_wait: 10ms}\n", "source.fetch_wait: 10ms: at least 1s"},
		{"source: {kind: kafka, brokers: [\"b:9092\"], topic: t, commit_every: -1}\n", "source.commit_every: must not be negative"},
		{"source: {kind: kafka, brokers: [\"b:9092\"], topic: t, commit_every: 5}\ncheckpoint: {dir: d}\n", "source.commit_every: with checkpoints"},
		{"sinks: {predictions: {kind: nats, subject: p, batch_timeout: 1ms}}\n", "sinks.predictions.batch_timeout: tunes a kafka client"},
		{"sinks: {predictions: {kind: kafka, topic: p, required_acks: two}}\n", "sinks.predictions.required_acks"},
		{"sinks: {predictions: {kind: kafka, topic: p, compression: brotli}}\n", "sinks.predictions.compression"},
		{"sinks: {predictions: {kind: kafka, topic: p, publish_window: 5}}\n", "sinks.predictions.publish_window: tunes a jetstream client"},
		{"sinks: {predictions: {kind: nats, subject: p, create: true}}\n", "sinks.predictions.create: applies to a kafka sink's topic"},
		{"sinks: {predictions: {kind: kafka, topic: p, partitions: 12}}\n", "sinks.predictions.partitions: applies to the topic create: true makes"},
		{"sinks: {predictions: {kind: kafka, topic: p, create: true, retention: 500us}}\n", "sinks.predictions.retention: out of range"},
		{"sinks: {predictions: {kind: kafka, topic: p, create: true, replication: 40000}}\n", "sinks.predictions.replication: out of range"},
	} {
		_, err := Parse("c.yaml", []byte(learner+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// A JetStream ack_batch that would leave more messages unacknowledged
// than max_ack_pending (the server would stop delivering), and a
// min_bytes above the client's max_bytes, are refused.
func TestTuningLimits(t *testing.T) {
	const learner = "learners: [{name: p, algorithm: perceptron}]\n"
	for _, tc := range []struct{ yaml, want string }{
		{"source: {kind: jetstream, url: \"nats://n:4222\", stream: S, subject: s, ack_batch: 100}\n", "source.ack_batch: 100 commits of up to 1000 records (source.commit_every)"},
		{"source: {kind: jetstream, url: \"nats://n:4222\", stream: S, subject: s, ack_batch: 2}\ncheckpoint: {dir: d}\n", "(checkpoint.every)"},
		{"source: {kind: kafka, brokers: [\"b:9092\"], topic: t, min_bytes: 2097152}\n", "source.min_bytes: 2097152 exceeds max_bytes 1048576"},
		{"source: {kind: kafka, brokers: [\"b:9092\"], topic: t, commit_interval: 1s}\ncheckpoint: {dir: d}\n", "source.commit_interval: with checkpoints"},
	} {
		_, err := Parse("c.yaml", []byte(learner+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := Parse("c.yaml", []byte(learner+"source: {kind: jetstream, url: \"nats://n:4222\", stream: S, subject: s, ack_batch: 10}\n")); err != nil {
		t.Error(err)
	}
}

// TestBigConfig: a big file without aliases is refused for what it is —
// past MaxFileBytes for its size, before it is parsed, or past
// MaxExpandedNodes for its own nodes — never for aliases it does not have.
func TestBigConfig(t *testing.T) {
	learnerLines := func(n int) string {
		var b strings.Builder
		b.WriteString("learners:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {name: l%d, algorithm: perceptron}\n", i)
		}
		return b.String()
	}
	// 300,000 learners: 12.8 MB.
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte(learnerLines(300_000)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := big + ": larger than 4194304 bytes (4 MiB; a configuration has a few kilobytes): refused"
	if _, err := Load(big); err == nil || err.Error() != want {
		t.Errorf("Load of a 12.8 MB config: %v, want %q", err, want)
	}
	// 20,000 learners: 0.8 MB of 120,001 nodes.
	want = "many.yaml: has more than 100000 YAML nodes (a configuration has a few hundred): refused"
	if _, err := Parse("many.yaml", []byte(learnerLines(20_000))); err == nil || err.Error() != want {
		t.Errorf("Parse of 20,000 learners: %v, want %q", err, want)
	}
	// 2,000 learners are a configuration.
	if c, err := Parse("some.yaml", []byte(learnerLines(2_000))); err != nil || len(c.Learners) != 2_000 {
		t.Errorf("Parse of 2,000 learners: %v", err)
	}
}

// TestAliasBomb: a config whose aliases nest 9 levels of 10 (10^9 nodes
// expanded) is refused with an error naming the file, without expanding
// them (which took 90 s of a CPU). The 20 s bound catches the old
// behaviour without claiming a speed.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	b.WriteString("learners: [{name: p, algorithm: perceptron}]\n")
	done := make(chan error, 1)
	go func() {
		_, err := Parse("bomb.yaml", []byte(b.String()))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || err.Error() != "bomb.yaml: its aliases expand to more than 100000 YAML nodes (a configuration has a few hundred): refused" {
			t.Errorf("Parse of an alias bomb: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Parse of an alias bomb did not return within 20 s")
	}
	// Aliases of a sane size still work.
	if _, err := Parse("ok.yaml", []byte("base: &l {name: p, algorithm: perceptron}\nlearners: [*l]\n")); err != nil && strings.Contains(err.Error(), "expand") {
		t.Errorf("a small alias refused: %v", err)
	}
}

// An unknown key close to a known one (a slip) is answered with that
// one; a key close to none lists the known keys only; a sink given as a
// bare path is shown a sink's form.
func TestUnknownKeyNearest(t *testing.T) {
	for _, tc := range []struct{ yaml, want, not string }{
		{"sinks: {predictions: {kind: file, paht: p.jsonl}}\nlearners: [{name: p, algorithm: perceptron}]\n", "sinks.predictions.paht: unknown key: did you mean path?", ""},
		{"models: {by: key, max_byte: 10}\nlearners: [{name: p, algorithm: perceptron}]\n", "models.max_byte: unknown key: did you mean max_bytes?", ""},
		{"features: {zzzzzz: 1}\nlearners: [{name: p, algorithm: perceptron}]\n", "features.zzzzzz: unknown key (known keys here:", "did you mean"},
		{"sinks: {dead_letters: dl.jsonl}\nlearners: [{name: p, algorithm: perceptron}]\n", "sinks.dead_letters: want a mapping of keys, a sink's kind and where it writes: {kind: file, path: FILE}", ""},
	} {
		_, err := Parse("c.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) || tc.not != "" && strings.Contains(err.Error(), tc.not) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
