package service

import (
	"fmt"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
)

// TestLineFormatTopics: with input.format tsv or libsvm, each record of a
// Kafka topic is one line of that format, and a live run over the topic
// learns exactly what a replay of the same lines does (one partition, so
// one order). A record that is not a line of the format is a dead letter,
// counted as in the replay.
func TestLineFormatTopics(t *testing.T) {
	var tsv, libsvm strings.Builder
	for i := range 400 {
		label := "ham"
		if i%3 == 0 {
			label = "spam"
		}
		fmt.Fprintf(&tsv, "%s\tmessage %d says %s words %d\n", label, i, label, i%7)
		fmt.Fprintf(&libsvm, "%+d %d:1 %d:%g\n", 2*(i%2)-1, 1+i%5, 10+i%3, float64(i%11)/10)
		if i%100 == 50 {
			tsv.WriteString("no tab in this record\n")
			libsvm.WriteString("+1 x:1\n")
		}
	}
	for _, tc := range []struct{ format, data string }{{"tsv", tsv.String()}, {"libsvm", libsvm.String()}} {
		t.Run(tc.format, func(t *testing.T) {
			c, err := config.Parse("lines.yaml", []byte(fmt.Sprintf(`input: {format: %s, positive: [spam], negative: [ham]}
features: {bits: 12, text: {ngrams: 2}}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, normalized: false, bias: true}
`, tc.format)))
			if err != nil {
				t.Fatal(err)
			}
			topic := "lines-" + tc.format
			brokers := kafkaCluster(t, 1, topic)
			cfg := kafkaTestConfig(brokers, topic, "g-"+tc.format)
			sink, err := connectors.NewKafkaSink(cfg, topic)
			if err != nil {
				t.Fatal(err)
			}
			lines := splitLines([]byte(tc.data))
			publishAll(t, sink, lines, nil)
			reps := runReports(t, c, openKafka(t, cfg))
			if len(reps) != 1 {
				t.Fatalf("%d reports, want 1", len(reps))
			}
			want := replayReport(t, c, []byte(tc.data))
			if want.Invalid != 4 || want.Labeled != 400 {
				t.Fatalf("replay: %d labeled, %d invalid; want 400 and 4", want.Labeled, want.Invalid)
			}
			sameReport(t, tc.format+" topic", reps[0].Report, want)
		})
	}
}

// TestEnvelopesValues: an envelope's value comes back as the bytes the
// broker held: JSON as is (a JSON string stays a string, quotes and all),
// anything else from base64 (bytes that are not UTF-8 included); a value
// over the record limit comes back as an oversized record, its start and
// its size; the other partitions are skipped.
func TestEnvelopesValues(t *testing.T) {
	lines := `{"partition":0,"offset":7,"key":"k","value":{"features":{"v":1},"label":1}}
{"partition":0,"offset":8,"value":"{\"x\":[1,0],\"label\":1}"}
{"partition":1,"offset":3,"value":{"a":1}}
{"partition":0,"offset":9,"value_base64":"c3BhbQloaSD/IHRoZXJl"}
{"partition":0,"offset":10,"value_base64":"MTIzNDU2Nzg5MGFiY2RlZg=="}
`
	const limit = 20
	e := NewEnvelopes([]string{"-"}, strings.NewReader(lines), 0, limit)
	for i, w := range []struct {
		value  string
		offset int64
	}{
		{`{"features":{"v":1},"label":1}`, 7},
		{`"{\"x\":[1,0],\"label\":1}"`, 8},
		{"spam\thi \xff there", 9},
		{"1234567890abcdef", 10},
	} {
		r, err := e.Fetch(t.Context())
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		value, size := w.value, 0
		if len(value) > limit {
			value, size = value[:limit+1], len(value)
		}
		if string(r.Value) != value || r.Offset != w.offset || r.Size != size || r.Partition != 0 {
			t.Errorf("record %d: %q offset %d size %d, want %q %d %d", i, r.Value, r.Offset, r.Size, value, w.offset, size)
		}
	}
	if _, err := e.Fetch(t.Context()); err != connectors.ErrEndOfInput {
		t.Errorf("after the last record: %v", err)
	}
}
