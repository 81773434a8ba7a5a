package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

// writeServedText writes, with a global model beside the models per key,
// what was served for the events of one key (or, in a partition's
// totals, of every key): per learner, the rounds, the mistakes of the
// choice between the key's model and the global one, those of each of
// the two, the choice's bound and which model predicts next. Nothing
// without a mix.
func writeServedText(w io.Writer, mix []pipeline.MixReport) error {
	if len(mix) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "served\trounds\tmistakes\taccuracy\town model\tglobal model\tbound\tnext")
	for _, m := range mix {
		verdict := "holds"
		if !m.Holds {
			verdict = "violated"
		}
		next := m.Next
		if next == "" {
			next = "-" // the totals: each key's own
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t<= %.4g %s\t%s\n", m.Learner, m.Rounds, m.Mistakes,
			accuracyText(m.Rounds, 1-float64(m.Mistakes)/float64(max(m.Rounds, 1))), m.OwnMistakes, m.GlobalMistakes, m.Bound, verdict, next)
	}
	return tw.Flush()
}

// writeKeyTotalsText writes a partition's totals over every key's model
// (t, of a snapshot): its records and keys, each learner's rounds,
// mistakes and loss over the keys' own models, what was served with a
// global model, and the global model's report.
func writeKeyTotalsText(w io.Writer, t service.Report) error {
	k := t.Keys
	fmt.Fprintf(w, "%s partition %d: totals over %d keys (%d resident, %d evictions)\n", t.Source, t.Partition, k.Keys, k.Resident, k.Evicted)
	r := t.Report
	r.Mix, r.Global = nil, nil
	if err := writeReportText(w, r, nil); err != nil {
		return err
	}
	if err := writeServedText(w, t.Mix); err != nil {
		return err
	}
	if g := t.Global; g != nil {
		fmt.Fprintf(w, "\nglobal model of partition %d (every event of the partition)\n", t.Partition)
		return writeReportText(w, *g, nil)
	}
	return nil
}

// keyTotals returns the reports of totals over models per key among
// reports (a snapshot's), by partition.
func keyTotals(reports []service.Report) map[int32]service.Report {
	out := map[int32]service.Report{}
	for _, r := range reports {
		if r.Keys != nil && r.Key == nil {
			out[r.Partition] = r
		}
	}
	return out
}
