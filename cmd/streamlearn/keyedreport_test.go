package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/regret"
	"github.com/streamlearn/streamlearn/internal/service"
)

// servedRow is a row of a text report's served table: a learner's
// rounds, the mistakes served, of the key's own model and of the global
// model.
type servedRow struct {
	rounds, served, own, global uint64
}

// textSections parses replay's text report of models per key: each
// key's served table (by key, then learner), the own models' mistakes
// and the served table of the partition's totals (key ""), and the keys
// the totals count.
func textSections(t *testing.T, out string) (served map[string]map[string]servedRow, own map[string]map[string]uint64, keys int) {
	t.Helper()
	served, own = map[string]map[string]servedRow{}, map[string]map[string]uint64{}
	key, table := "", ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case strings.Contains(line, " partition 0 key "):
			key, table = strings.Trim(f[len(f)-1], `"`), ""
		case strings.Contains(line, " partition 0: totals over "):
			key, table = "", ""
			keys, _ = strconv.Atoi(f[len(f)-6])
		case strings.HasPrefix(line, "global model of partition"):
			key, table = "global", ""
		case len(f) == 0:
			table = ""
		case f[0] == "learner" || f[0] == "served":
			table = f[0]
		case table == "served":
			var r servedRow
			for i, p := range []*uint64{&r.rounds, &r.served, nil, &r.own, &r.global} {
				if p != nil {
					*p, _ = strconv.ParseUint(f[1+i], 10, 64)
				}
			}
			if served[key] == nil {
				served[key] = map[string]servedRow{}
			}
			served[key][f[0]] = r
		case table == "learner":
			if own[key] == nil {
				own[key] = map[string]uint64{}
			}
			own[key][f[0]], _ = strconv.ParseUint(f[3], 10, 64)
		}
	}
	return served, own, keys
}

// The text report of models per key with a global model shows, per key,
// what was served (the choice between the key's model and the global
// one) beside the key's own model, then the totals over every key and the
// global model: the numbers `--report json` carries.
func TestKeyedTextReport(t *testing.T) {
	dir := t.TempDir()
	events, _ := keyedEvents(t, dir, 3000, 12)
	cfg := filepath.Join(dir, "keyed.yaml")
	if err := os.WriteFile(cfg, []byte(keyedLearners+"models: {by: key, max: 5, global: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, jsonOut, errOut := run(t, "replay", "-c", cfg, "--report", "json", events)
	if code != 0 {
		t.Fatalf("replay --report json: exit %d: %s", code, errOut)
	}
	code, text, errOut := run(t, "replay", "-c", cfg, events)
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errOut)
	}
	served, own, keys := textSections(t, text)
	totals := map[string]servedRow{}
	ownTotals := map[string]uint64{}
	n := 0
	var jsonTotals []service.Report
	dec := json.NewDecoder(bytes.NewReader([]byte(jsonOut)))
	for dec.More() {
		var r service.Report
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Key == nil && r.Keys != nil {
			if n != 12 {
				t.Errorf("the partition's totals after %d keys' reports, want after the 12", n)
			}
			jsonTotals = append(jsonTotals, r)
			continue
		}
		n++
		if r.Key == nil || len(r.Mix) != 4 {
			t.Fatalf("a JSON report without a key or a mix of the 4 learners: %+v", r)
		}
		for i, m := range r.Mix {
			want := servedRow{m.Rounds, m.Mistakes, m.OwnMistakes, m.GlobalMistakes}
			if got := served[*r.Key][m.Learner]; got != want {
				t.Errorf("key %s learner %s served: text %+v, JSON %+v", *r.Key, m.Learner, got, want)
			}
			if got := own[*r.Key][m.Learner]; got != r.Learners[i].Mistakes {
				t.Errorf("key %s learner %s own model: text %d mistakes, JSON %d", *r.Key, m.Learner, got, r.Learners[i].Mistakes)
			}
			s := totals[m.Learner]
			totals[m.Learner] = servedRow{s.rounds + m.Rounds, s.served + m.Mistakes, s.own + m.OwnMistakes, s.global + m.GlobalMistakes}
			ownTotals[m.Learner] += r.Learners[i].Mistakes
		}
	}
	if n != 12 || keys != n {
		t.Errorf("%d keys' JSON reports, the text's totals over %d keys; want 12", n, keys)
	}
	for name, want := range totals {
		if got := served[""][name]; got != want {
			t.Errorf("totals, learner %s served: text %+v, the keys' JSON summed %+v", name, got, want)
		}
		if got := own[""][name]; got != ownTotals[name] {
			t.Errorf("totals, learner %s own models: text %d mistakes, the keys' JSON summed %d", name, got, ownTotals[name])
		}
		// The global model learns every event: its mistakes on the
		// keys' rounds are its own.
		if got := own["global"][name]; got != want.global {
			t.Errorf("global model, learner %s: text %d mistakes, the keys' JSON global mistakes summed %d", name, got, want.global)
		}
		if want.served == want.own {
			t.Errorf("learner %s: served %d mistakes, as many as the own models: the test cannot tell them apart", name, want.served)
		}
	}
	if len(totals) != 4 {
		t.Errorf("%d learners in the totals, want 4", len(totals))
	}
	// The JSON's totals are the text's: the keys, the served summed, the
	// global model's report.
	if len(jsonTotals) != 1 {
		t.Fatalf("%d totals lines in the JSON, want 1 (one partition)", len(jsonTotals))
	}
	jt := jsonTotals[0]
	if jt.Keys.Keys != 12 || jt.Keys.Evicted == 0 || jt.Global == nil || len(jt.Mix) != 4 {
		t.Errorf("JSON totals: keys %+v, global %v, %d learners' mix; want 12 keys, evictions (max: 5), the global model's report, 4", *jt.Keys, jt.Global != nil, len(jt.Mix))
	}
	for _, m := range jt.Mix {
		if got, want := (servedRow{m.Rounds, m.Mistakes, m.OwnMistakes, m.GlobalMistakes}), totals[m.Learner]; got != want {
			t.Errorf("JSON totals, learner %s served: %+v, the keys' summed %+v", m.Learner, got, want)
		}
	}
	for i, l := range jt.Global.Learners {
		if got := own["global"][l.Name]; got != l.Mistakes || i >= 4 {
			t.Errorf("JSON totals' global model, learner %s: %d mistakes, the text's %d", l.Name, l.Mistakes, got)
		}
	}
}

// inspect reads a checkpoint of models per key that a real run wrote:
// its keys (the 10 of the most records, or every one with --all-keys),
// each key's records, own and served mistakes (those of the run's report
// of the key) and model digest, what was served over every key and the
// global model.
func TestInspectKeyedKeys(t *testing.T) {
	dir := t.TempDir()
	events, _ := keyedEvents(t, dir, 3000, 13)
	state := filepath.Join(dir, "state")
	cfg := filepath.Join(dir, "keyed.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "%smodels: {by: key, max: 5, global: true}\nsource: {kind: file, path: %q}\ncheckpoint: {dir: %q}\n",
		keyedLearners, events, state), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	want := map[string]service.Report{}
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r service.Report
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Key == nil {
			continue // the partition's totals
		}
		want[*r.Key] = r
	}
	ckpt := filepath.Join(state, "partition-0.ckpt")

	code, out, errOut = run(t, "inspect", "--report", "json", "--all-keys", ckpt)
	if code != 0 {
		t.Fatalf("inspect --all-keys: exit %d: %s", code, errOut)
	}
	got, err := readInspected([]byte(out))
	if err != nil || len(got) != 1 {
		t.Fatalf("inspect --report json: %v, %d checkpoints\n%s", err, len(got), out)
	}
	k := got[0].ModelsPerKey
	if len(got) != 1 || k == nil || k.Keys != 13 || len(k.Shown) != 13 || !k.All || len(k.GlobalModelSHA256) != 64 {
		t.Fatalf("inspect --all-keys: %+v, want the 13 keys and the global model's digest", k)
	}
	digests := map[string]bool{}
	var total uint64
	for i, s := range k.Shown {
		r, ok := want[s.Key]
		if !ok || i > 0 && s.Key <= k.Shown[i-1].Key {
			t.Errorf("key %q: not a key of the run, or not in key order", s.Key)
			continue
		}
		total += s.Events
		digests[s.ModelSHA256] = true
		if s.Events != r.Events || len(s.Learners) != 4 || len(s.ModelSHA256) != 64 {
			t.Errorf("key %s: %+v; the run's report has %d events", s.Key, s, r.Events)
			continue
		}
		for j, l := range r.Learners {
			if got := s.Learners[j]; got.Name != l.Name || got.Mistakes != l.Mistakes || got.Served == nil || *got.Served != r.Mix[j].Mistakes {
				t.Errorf("key %s learner %d: %+v; the run's report: %s, mistakes %d, served %d", s.Key, j, got, l.Name, l.Mistakes, r.Mix[j].Mistakes)
			}
		}
	}
	if total != 3000 || len(digests) != 13 {
		t.Errorf("%d events over the keys, %d distinct model digests; want 3000 and 13", total, len(digests))
	}

	// As text, the 10 keys of the most records, most first, after what
	// was served and the global model.
	code, out, errOut = run(t, "inspect", "-c", cfg, ckpt)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errOut)
	}
	for _, w := range []string{"report verified", "\nserved  rounds  mistakes", "global model (every event of the partition): model_sha256 " + k.GlobalModelSHA256,
		"13 keys; the 10 of the most records (--all-keys: every key):\nkey "} {
		if !strings.Contains(out, w) {
			t.Errorf("inspect does not print %q:\n%s", w, out)
		}
	}
	_, table, _ := strings.Cut(out, "(--all-keys: every key):\n")
	rows := strings.Split(strings.TrimSpace(table), "\n")[1:]
	if len(rows) != 10 {
		t.Fatalf("%d keys printed, want 10:\n%s", len(rows), table)
	}
	prev := uint64(1 << 63)
	for _, row := range rows {
		f := strings.Fields(row)
		key, _ := strconv.Unquote(f[0])
		n, _ := strconv.ParseUint(f[1], 10, 64)
		r, ok := want[key]
		if !ok || n != r.Events || n > prev {
			t.Errorf("row %q: not a key of the run with its %d events, or not most records first", row, r.Events)
		}
		prev = n
		if !strings.HasPrefix(digestOf(k, key), f[len(f)-1]) {
			t.Errorf("row %q: digest not the key's model's %s", row, digestOf(k, key))
		}
	}
}

// digestOf returns key's model digest among k's keys shown.
func digestOf(k *inspectedKeys, key string) string {
	for _, s := range k.Shown {
		if s.Key == key {
			return s.ModelSHA256
		}
	}
	return "none"
}

// The text report writes its numbers with strconv, as fmt's %.4g and
// %.4f write them: the same bytes for infinities, NaN, signed zeros,
// the shortest and the longest exponents.
func TestReportNumbersAsFmt(t *testing.T) {
	vals := []float64{math.Inf(1), math.Inf(-1), math.NaN(), 0, math.Copysign(0, -1), 1e21, 1e-7, 123456, 0.5, -3.25, 8882, 0.09251, 1e100, 5e-324, math.MaxFloat64, 0.99995}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		vals = append(vals, math.Float64frombits(rng.Uint64()), rng.NormFloat64()*math.Pow(10, float64(rng.IntN(40)-20)))
	}
	for _, v := range vals {
		if got, want := g4(v), fmt.Sprintf("%.4g", v); got != want {
			t.Fatalf("g4(%v) = %q, %%.4g %q", v, got, want)
		}
		if got, want := accuracyText(1, v), fmt.Sprintf("%.4f", v); got != want && !math.IsNaN(v) {
			t.Fatalf("accuracyText(1, %v) = %q, %%.4f %q", v, got, want)
		}
	}
}

// BenchmarkKeyReportsText: the text of 10,000 keys' reports (two
// learners, a bound, a certificate, a regret), as replay writes them
// at the end.
func BenchmarkKeyReportsText(b *testing.B) {
	var rs []service.Report
	for i := range 10000 {
		key := "k" + strconv.Itoa(i)
		r := service.Report{Source: "file:keyed.jsonl", Key: &key}
		r.Events, r.Labeled = 300, 300
		r.Answer = "perceptron"
		r.Learners = []regret.LearnerReport{
			{Name: "perceptron", Algorithm: "perceptron", Rounds: 300, Mistakes: 98, Accuracy: 0.6733, Loss: 98,
				Certificate: &regret.CertificateReport{Kind: "max_margin", Value: 0.2888}, StateSHA256: strings.Repeat("9c", 32)},
			{Name: "adagrad", Algorithm: "adagrad", Rounds: 300, Mistakes: 80, Accuracy: 0.7333, Loss: 201.5,
				Bound:  &regret.BoundReport{Kind: online.RegretBound, Value: 8882, Holds: true},
				Regret: &regret.RegretReport{Comparator: "zero_vector", Value: -77.25}, StateSHA256: strings.Repeat("ef", 32)},
		}
		rs = append(rs, r)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := writeReports(io.Discard, "text", eachOf(rs), nil, nil, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rs))*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}
