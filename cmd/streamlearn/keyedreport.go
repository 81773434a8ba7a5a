package main

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
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
// (t, of a snapshot): its records and keys, with p's seconds and rate
// (the whole run's, of every key), the labels of its keys summed, each
// learner's rounds, mistakes and loss over the keys' own models, what was
// served with a global model, and the global model's report.
func writeKeyTotalsText(w io.Writer, t service.Report, p pace) error {
	k := t.Keys
	fmt.Fprintf(w, "%s partition %d: totals over %d keys (%d resident, %d evictions)\n", t.Source, t.Partition, k.Keys, k.Resident, k.Evicted)
	r := t.Report
	r.Mix, r.Global = nil, nil
	if err := writeReportText(w, r, &p); err != nil {
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

// withKeyTotals renders with of each report each gives (possibly on
// several goroutines) and writes it with write, in each's order; with
// models per key it calls keyTotal with each partition's totals over its
// keys (of totals, a snapshot's reports) after the partition's last key,
// the labels of the partition's keys summed into them in that order (the
// snapshot's have none).
func withKeyTotals(each reports, totals []service.Report, of func(service.Report) (rendered, error), write func(rendered) error, keyTotal func(service.Report) error) error {
	sums := keyTotals(totals)
	// A partition's keys' totals follow its last key: the next report's
	// partition, or the end, says which that was.
	var prev *rendered
	var labels *pipeline.LabelsReport
	totalsOf := func(r *rendered) error {
		t, ok := sums[r.partition]
		if !ok || !r.keyed {
			return nil
		}
		t.Labels, labels = labels, nil
		return keyTotal(t)
	}
	err := each(func(r service.Report) (rendered, error) {
		out, err := of(r)
		out.partition, out.keyed = r.Partition, r.Key != nil
		if r.Key != nil {
			out.labels = r.Labels
		}
		return out, err
	}, func(r rendered) error {
		if prev != nil && prev.partition != r.partition {
			if err := totalsOf(prev); err != nil {
				return err
			}
		}
		if r.labels != nil {
			labels = addLabels(labels, r.labels)
		}
		err := write(r)
		r.b = nil
		prev = &r
		return err
	})
	if err != nil || prev == nil {
		return err
	}
	return totalsOf(prev)
}

// addLabels returns sum with the labels report l of one more key's model
// added: the counts summed, the longest delay, the mean delay over every
// label joined. sum may be nil (none yet); l is not changed.
func addLabels(sum, l *pipeline.LabelsReport) *pipeline.LabelsReport {
	if sum == nil {
		sum = &pipeline.LabelsReport{}
	}
	sum.Joined += l.Joined
	sum.Pending += l.Pending
	sum.Expired += l.Expired
	sum.ExpiredLearned += l.ExpiredLearned
	sum.Unknown += l.Unknown
	sum.Late += l.Late
	sum.Duplicate += l.Duplicate
	sum.DelaySum += l.DelaySum
	for i, n := range l.DelayCounts {
		sum.DelayCounts[i] += n
	}
	sum.Delay.Max = max(sum.Delay.Max, l.Delay.Max)
	if sum.Joined > 0 {
		sum.Delay.Mean = float64(sum.DelaySum) / float64(sum.Joined)
	}
	return sum
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

// inspectKeys reads the keys of state, a checkpoint's state of models per
// key, whose report is rep: every key with all, else the topKeys of the
// most records. Totals that are not the report's are an error.
func inspectKeys(state []byte, rep pipeline.Report, all bool) (*inspectedKeys, error) {
	c, err := pipeline.ReadKeyed(state)
	if err != nil {
		return nil, fmt.Errorf("its state: %w", err)
	}
	if c.Events != rep.Events || c.Learned != rep.Labeled || c.Predicted != rep.Predicted || c.Invalid != rep.Invalid {
		return nil, fmt.Errorf("inconsistent: the state holds %d events (%d labeled, %d predicted, %d invalid), the report says %d (%d, %d, %d)",
			c.Events, c.Learned, c.Predicted, c.Invalid, rep.Events, rep.Labeled, rep.Predicted, rep.Invalid)
	}
	out := &inspectedKeys{Keys: len(c.Keys), All: all}
	if c.Global != nil {
		out.GlobalModelSHA256 = hex.EncodeToString(c.GlobalSHA256[:])
	}
	keys := c.Keys
	if !all {
		keys = slices.Clone(keys) // in key order: a stable sort keeps ties so
		slices.SortStableFunc(keys, func(a, b pipeline.KeyContents) int { return cmp.Compare(b.Events, a.Events) })
		keys = keys[:min(len(keys), topKeys)]
	}
	for _, k := range keys {
		ik := inspectedKey{Key: k.Key, Events: k.Events, ModelSHA256: hex.EncodeToString(k.ModelSHA256[:]), StateBytes: k.StateBytes}
		for i, m := range k.Mistakes {
			l := inspectedKeyLearner{Mistakes: m}
			if i < len(rep.Learners) {
				l.Name = rep.Learners[i].Name
			}
			if i < len(k.Mix) {
				l.Served = &k.Mix[i].Mixed
			}
			ik.Learners = append(ik.Learners, l)
		}
		out.Shown = append(out.Shown, ik)
	}
	return out, nil
}

// writeInspectedKeys writes, after the report of a checkpoint of models
// per key (rep, the totals), what was served over every key and the
// global model's report (with a global model), then the keys k shows:
// each one's records, each learner's mistakes by the key's own model and
// of what was served, and its model's digest.
func writeInspectedKeys(w io.Writer, rep pipeline.Report, k *inspectedKeys) error {
	if err := writeServedText(w, rep.Mix); err != nil {
		return err
	}
	if g := rep.Global; g != nil {
		fmt.Fprintf(w, "\nglobal model (every event of the partition): model_sha256 %s\n", k.GlobalModelSHA256)
		if err := writeReportText(w, *g, nil); err != nil {
			return err
		}
	}
	which := fmt.Sprintf("the %d of the most records (--all-keys: every key)", len(k.Shown))
	if k.All || len(k.Shown) == k.Keys {
		which = "every key"
	}
	fmt.Fprintf(w, "\n%d keys; %s:\n", k.Keys, which)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "key\tevents"
	served := len(k.Shown) > 0 && len(k.Shown[0].Learners) > 0 && k.Shown[0].Learners[0].Served != nil
	for _, l := range rep.Learners {
		head += "\t" + l.Name
		if served {
			head += "\t" + l.Name + " served"
		}
	}
	fmt.Fprintln(tw, head+"\tmodel_sha256")
	for _, key := range k.Shown {
		fmt.Fprintf(tw, "%q\t%d", key.Key, key.Events)
		for _, l := range key.Learners {
			fmt.Fprintf(tw, "\t%d", l.Mistakes)
			if served && l.Served != nil {
				fmt.Fprintf(tw, "\t%d", *l.Served)
			}
		}
		fmt.Fprintf(tw, "\t%s\n", key.ModelSHA256[:16])
	}
	return tw.Flush()
}
