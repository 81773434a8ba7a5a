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
