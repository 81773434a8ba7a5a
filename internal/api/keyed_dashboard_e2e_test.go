package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/service"
)

// With models per key and a global model, the page shows each
// partition's totals over its keys, its keys (how many, resident,
// evicted), each learner's served mix and the top keys with their own
// and served mistakes: the numbers of /v1/report, read from the DOM; and
// no chart says "no labeled events yet" while events are labeled (the
// totals have no curve: a theorem is about one model). A top key's served
// mistakes are its own report's mix (/v1/report?key=).
func TestDashboardModelsPerKey(t *testing.T) {
	t.Parallel() // a headless Chromium of its own, mostly waited for
	bin := chromium(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "keyed.yaml")
	yaml := `features: {bits: 8}
models: {by: key, max: 4, global: true}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, bias: true}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 17}}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// 14 keys, key k on partition k%2 (the source puts line i on
	// partition i%2), of about as many events each, with a threshold per
	// key: the global model serves some keys better than their own.
	const keys, n = 14, 2400
	rng := rand.New(rand.NewPCG(7, 8))
	var lines [][]byte
	for i := range n {
		k := 2*rng.IntN(keys/2) + i%2
		v := rng.Float64()
		label := 0
		if v >= float64(k%3+2)/6 {
			label = 1
		}
		lines = append(lines, fmt.Appendf(nil, `{"key":"user-%d","features":{"v":%.3f,"w":%.3f},"label":%d}`, k, v, rng.Float64(), label))
	}
	// Running (the serving copies behind ?key= are a running service's),
	// once every event is learned.
	svc, ts := setup(t, cfg, &sliceSource{lines: lines, partitions: 2, block: true}, nil)
	runUntil(t, svc, n)
	var reports []service.Report
	code, _, body := get(t, "GET", ts.URL+"/v1/report")
	if code != http.StatusOK {
		t.Fatalf("/v1/report: %d %s", code, body)
	}
	if err := json.Unmarshal(body, &reports); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 {
		t.Fatalf("%d reports, want the 2 partitions'", len(reports))
	}
	dom := headless(t, bin, ts.URL+"/", time.Second, "--dump-dom")
	if !bytes.Contains(dom, []byte(`data-ready="true"`)) {
		t.Fatalf("the page never rendered a poll:\n%s", dom)
	}
	if bytes.Contains(dom, []byte("no labeled events yet")) {
		t.Errorf("the page says \"no labeled events yet\" of %d labeled events", reports[0].Labeled+reports[1].Labeled)
	}
	got := domFields(dom)
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	check := func(key, want string) {
		t.Helper()
		if f, ok := got[key]; !ok {
			t.Errorf("%s: not on the page", key)
		} else if f.value != want {
			t.Errorf("%s: page has %q, /v1/report %q", key, f.value, want)
		}
	}
	var labeled uint64
	topKeys := 0
	for _, r := range reports {
		p := strconv.Itoa(int(r.Partition)) + "/"
		labeled += r.Labeled
		if r.Keys == nil || len(r.Mix) != 3 || len(r.TopKeys) == 0 || r.Labeled == 0 {
			t.Fatalf("partition %d: %+v, want the totals of keys with a mix of 3 learners", r.Partition, r.Report)
		}
		check(p+"/events", u(r.Events))
		check(p+"/labeled", u(r.Labeled))
		check(p+"/keys", strconv.Itoa(r.Keys.Keys))
		check(p+"/keys_resident", strconv.Itoa(r.Keys.Resident))
		check(p+"/keys_evicted", u(r.Keys.Evicted))
		for i, l := range r.Learners {
			k := p + l.Name + "/"
			check(k+"rounds", u(l.Rounds))
			check(k+"mistakes", u(l.Mistakes))
			m := r.Mix[i]
			check(k+"mix_rounds", u(m.Rounds))
			check(k+"mix_mistakes", u(m.Mistakes))
			check(k+"mix_own", u(m.OwnMistakes))
			check(k+"mix_global", u(m.GlobalMistakes))
			check(k+"mix_bound", strconv.FormatFloat(m.Bound, 'g', -1, 64))
		}
		for _, tk := range r.TopKeys {
			topKeys++
			check(p+"key="+tk.Key+":/key_events", u(tk.Events))
			// The key's own report: what was served for it is its mix.
			code, _, body := get(t, "GET", ts.URL+"/v1/report?partition="+strconv.Itoa(int(r.Partition))+"&key="+url.QueryEscape(tk.Key))
			var kr service.Report
			if code != http.StatusOK || json.Unmarshal(body, &kr) != nil || len(kr.Mix) != len(r.Learners) {
				t.Fatalf("/v1/report?key=%s: %d %s", tk.Key, code, body)
			}
			if len(tk.Served) != len(r.Learners) || len(tk.Mistakes) != len(r.Learners) {
				t.Fatalf("top key %s: mistakes %v, served %v; want one per learner", tk.Key, tk.Mistakes, tk.Served)
			}
			for i, l := range r.Learners {
				k := p + "key=" + tk.Key + ":" + l.Name + "/"
				check(k+"key_mistakes", u(tk.Mistakes[i]))
				check(k+"key_served", u(tk.Served[i]))
				if tk.Served[i] != kr.Mix[i].Mistakes || tk.Mistakes[i] != kr.Learners[i].Mistakes {
					t.Errorf("top key %s learner %s: mistakes %d, served %d; its report: %d, %d", tk.Key, l.Name,
						tk.Mistakes[i], tk.Served[i], kr.Learners[i].Mistakes, kr.Mix[i].Mistakes)
				}
			}
		}
	}
	check("//total_labeled", u(labeled))
	if topKeys != keys {
		t.Errorf("%d top keys over the partitions, want the %d keys", topKeys, keys)
	}
	// What was served differs from the own models' somewhere, or the
	// page could show one for the other unseen.
	differ := false
	for _, r := range reports {
		for i, l := range r.Learners {
			differ = differ || r.Mix[i].Mistakes != l.Mistakes
		}
	}
	if !differ {
		t.Error("served and own mistakes are equal everywhere: the case does not tell them apart")
	}
}
