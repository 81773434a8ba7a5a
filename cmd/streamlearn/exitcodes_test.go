package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

// TestNothingLearned: a replay to which records came and from which
// nothing was learned exits 3, saying on stderr the reasons, the first
// record rejected and what to set; --allow-empty exits 0; a replay that
// learned from some records exits 0 with a line counting the rejected.
func TestNothingLearned(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Labels as the SMS Spam Collection has them: ham and spam.
	sms := write("sms.tsv", "ham\tGo until jurong point\nspam\tFree entry in 2 a wkly comp\nham\tOk lar\n")
	labels := write("labels.jsonl", `{"id":"e-1","label":1}`+"\n"+`{"id":"e-2","label":0}`+"\n")
	unlabeled := write("unlabeled.jsonl", `{"features":{"v":1}}`+"\n")
	some := write("some.jsonl", `{"features":{"v":1},"label":1}`+"\n"+`{"features":{"v":1e400},"label":1}`+"\n"+`{"id":"e-1","label":1}`+"\n")
	// Three reasons, one record each: the first rejected is the label no
	// configuration names, its hint comes first.
	mixed := write("mixed.jsonl", `{"features":{"v":1},"label":"maybe"}`+"\n"+`{"id":"e-1","label":1}`+"\n"+`{"features":{"v":1e400},"label":1}`+"\n")
	// Delayed labels, every one after its event expired (wait 1 record).
	late := write("late.jsonl", `{"id":"a","features":{"v":1}}`+"\n"+`{"id":"b","features":{"v":2}}`+"\n"+`{"id":"c","features":{"v":3}}`+"\n"+
		`{"id":"a","label":1}`+"\n"+`{"id":"b","label":0}`+"\n"+`{"id":"c","label":1}`+"\n")
	lateCfg := write("late.yaml", "labels: {delayed: true, wait: 1, max_pending: 10}\nlearners: [{name: p, algorithm: perceptron}]\n")
	// A TSV file read by a config that fixes the format to JSONL.
	jsonlCfg := write("jsonl.yaml", "input: {format: jsonl, positive: [spam], negative: [ham]}\nlearners: [{name: p, algorithm: perceptron}]\n")
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"labels not configured", []string{sms}, 3, []string{
			"streamlearn replay: 3 records came and none was learned: 3 rejected (label 3)",
			"first rejected: event: " + sms + `:1: field "label": label: "ham" is not a configured label (+1: 1, true; -1: 0, -1, false)`,
			"hint: the labels are not the configured ones: name the values of the file's labels with input.positive and input.negative",
			"--allow-empty"}},
		{"label events without labels.delayed", []string{labels}, 3, []string{
			"2 records came and none was learned: 2 rejected (empty 2)",
			`first rejected: event: ` + labels + `:1: empty:`,
			"hint: these are label events (an id and a label, no features): labels.delayed: true"}},
		{"no label", []string{unlabeled}, 3, []string{"1 record came and none was learned: none has a label (1 predicted only)", "labels.delayed: true"}},
		{"hints follow the reasons", []string{mixed}, 3, []string{
			"3 records came and none was learned: 3 rejected (empty 1, label 1, nonfinite 1)",
			"first rejected: event: " + mixed + `:1: field "label": label: "maybe" is not a configured label (+1: 1, true; -1: 0, -1, false)` +
				"\n  hint: the labels are not the configured ones",
			"\n  hint: these are label events (an id and a label, no features): labels.delayed: true"}},
		{"labels late", []string{"-c", lateCfg, late}, 3, []string{
			"6 records came and none was learned: 3 rejected (label_late 3)",
			"hint: labels came after their events expired: raise labels.wait"}},
		{"not the configured format", []string{"-c", jsonlCfg, sms}, 3, []string{
			"3 records came and none was learned: 3 rejected (malformed 3)",
			"hint: the records are not in the input's format: set input.format"}},
		{"gates do not hide it", []string{"--fail-on-violation", "--min-accuracy", "perceptron=0", sms}, 3, []string{"none was learned"}},
		{"allowed", []string{"--allow-empty", sms}, 0, []string{"streamlearn replay: 3 of 3 records rejected: label 3\n"}},
		{"some learned", []string{some}, 0, []string{"streamlearn replay: 2 of 3 records rejected: empty 1, nonfinite 1\n"}},
	} {
		code, out, errOut := run(t, append([]string{"replay"}, c.args...)...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d\n%s%s", c.name, code, c.code, out, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, errOut)
			}
		}
		if c.code == 3 && out != "" {
			t.Errorf("%s: a report on stdout: %s", c.name, out)
		}
		if strings.Count(errOut, "hint: ") > 1 && strings.Contains(errOut, "hint: docs/configuration.md") {
			t.Errorf("%s: the generic hint beside a specific one:\n%s", c.name, errOut)
		}
		if strings.Contains(errOut, "label_late") && strings.Contains(errOut, "hint: docs/configuration.md") {
			t.Errorf("%s: late labels with the generic hint:\n%s", c.name, errOut)
		}
	}
}

// TestRunNothingLearned: run exits 3 when every record that came was
// rejected, and 0 when records were predicted only (a served stream whose
// labels come later or never).
func TestRunNothingLearned(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, data string
		code       int
		want       string
	}{
		{"all rejected", `{"id":"a","label":1}` + "\n" + `{"id":"b","label":0}` + "\n", 3,
			"streamlearn run: 2 records came and none was learned: 2 rejected (empty 2)"},
		{"predicted only", `{"features":{"v":1}}` + "\n" + `{"features":{"v":2}}` + "\n", 0, ""},
	} {
		data := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".jsonl")
		cfg := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
		if err := os.WriteFile(data, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, []byte("source: {kind: file, path: "+data+"}\nlearners: [{name: p, algorithm: perceptron}]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := run(t, "run", "-c", cfg, "--until-end", "--http", "off")
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, want %d and %q on stderr:\n%s%s", c.name, code, c.code, c.want, out, errOut)
		}
	}
}

// TestFormatsExplicitAndInferred: every format, given as input.format or
// inferred from the file, gives the same report, over a plain file, a
// gzipped one and standard input; a stream's records take every format
// but csv, which is refused with an error saying why.
func TestFormatsExplicitAndInferred(t *testing.T) {
	dir := t.TempDir()
	records := map[string]string{
		"jsonl":  `{"features":{"a":1,"b":0},"label":1}` + "\n" + `{"features":{"a":0,"b":1},"label":0}` + "\n" + `{"features":{"a":1,"b":1},"label":1}` + "\n",
		"libsvm": "+1 1:1 2:0\n-1 1:0 2:1\n+1 1:1 2:1\n",
		"csv":    "a,b,type\n1,0,spam\n0,1,nonspam\n1,1,spam\n",
		"tsv":    "spam\t1 0\nnonspam\t0 1\nspam\t1 1\n",
	}
	input := "input: {label_column: type, positive: [spam], negative: [nonspam]"
	for _, format := range []string{"jsonl", "libsvm", "csv", "tsv"} {
		plain := filepath.Join(dir, "t."+format)
		if err := os.WriteFile(plain, []byte(records[format]), 0o644); err != nil {
			t.Fatal(err)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write([]byte(records[format]))
		zw.Close()
		if err := os.WriteFile(plain+".gz", gz.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		inferred := filepath.Join(dir, format+"-inferred.yaml")
		explicit := filepath.Join(dir, format+"-explicit.yaml")
		learners := "learners: [{name: p, algorithm: perceptron}, {name: a, algorithm: adagrad}]\n"
		os.WriteFile(inferred, []byte(input+"}\n"+learners), 0o644)
		os.WriteFile(explicit, []byte(input+", format: "+format+"}\n"+learners), 0o644)
		var fromFile pipeline.Report // the replay of the plain file
		for _, file := range []string{plain, plain + ".gz", "-"} {
			replay := func(cfg string) pipeline.Report {
				args := []string{"replay", "--report", "json", "-c", cfg, file}
				var o, e bytes.Buffer
				var code int
				if file == "-" {
					code = mainWithStdin(t, records[format], args, &o, &e)
				} else {
					code = Main(context.Background(), args, &o, &e)
				}
				if code != 0 {
					t.Fatalf("%s %s: exit %d: %s", cfg, file, code, e.String())
				}
				var r pipeline.Report
				if err := json.Unmarshal(o.Bytes(), &r); err != nil {
					t.Fatal(err)
				}
				r.Seconds = 0
				return r
			}
			want, got := replay(inferred), replay(explicit)
			if file == plain {
				fromFile = want
			}
			if want.Labeled != 3 || want.Invalid != 0 {
				t.Errorf("%s %s inferred: labeled %d invalid %d, want 3 and 0", format, file, want.Labeled, want.Invalid)
			}
			wj, _ := json.Marshal(want)
			gj, _ := json.Marshal(got)
			if !bytes.Equal(wj, gj) {
				t.Errorf("%s %s: format given:\n%s\nwant, as inferred:\n%s", format, file, gj, wj)
			}
		}
		// A stream: run's file source hands its lines one by one.
		cfg := filepath.Join(dir, format+"-stream.yaml")
		os.WriteFile(cfg, []byte(input+", format: "+format+"}\n"+learners+"source: {kind: file, path: "+plain+"}\n"), 0o644)
		code, out, errOut := run(t, "run", "-c", cfg, "--until-end", "--http", "off", "--report", "json")
		if format == "csv" {
			if code != 1 || !strings.Contains(errOut, "input.format csv: a record of a stream has no header line; use jsonl, libsvm or tsv") {
				t.Errorf("run of csv records: exit %d, %q", code, errOut)
			}
			continue
		}
		if code != 0 {
			t.Fatalf("run of %s records: exit %d: %s", format, code, errOut)
		}
		var r pipeline.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if r.Labeled != 3 || r.Invalid != 0 {
			t.Errorf("run of %s records: labeled %d invalid %d, want 3 and 0", format, r.Labeled, r.Invalid)
		}
		// The same model as the replay of the file: the learners' states.
		if len(r.Learners) != 2 {
			t.Errorf("run of %s records: %d learners, want 2", format, len(r.Learners))
		}
		for i, l := range r.Learners {
			if i >= len(fromFile.Learners) || l.StateSHA256 != fromFile.Learners[i].StateSHA256 || l.Mistakes != fromFile.Learners[i].Mistakes {
				t.Errorf("run of %s records: learner %s differs from the replay of the file", format, l.Name)
			}
		}
	}
}

// mainWithStdin runs Main with s on standard input.
func mainWithStdin(t *testing.T, s string, args []string, stdout, stderr *bytes.Buffer) int {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.Write([]byte(s)); w.Close() }()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old; r.Close() }()
	return Main(context.Background(), args, stdout, stderr)
}

// TestRateExcludesIdle: the rate of run's final report is over the seconds
// spent learning: a run that learned its records at once and then waited
// for more for 3 s says less than half of that (learning 200 records takes
// milliseconds; the idle time counted would make it at least 3 s, however
// loaded the machine).
func TestRateExcludesIdle(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "d.jsonl")
	var b strings.Builder
	for i := range 200 {
		b.WriteString(`{"features":{"v":` + strconv.Itoa(i%7) + `},"label":` + strconv.Itoa(i%2) + "}\n")
	}
	os.WriteFile(data, []byte(b.String()), 0o644)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("source: {kind: file, path: "+data+"}\nlearners: [{name: p, algorithm: perceptron}]\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	idle := 3 * time.Second
	time.AfterFunc(idle, cancel) // the file followed at its end: idle until then
	var o, e bytes.Buffer
	if code := Main(ctx, []string{"run", "-c", cfg, "--http", "off"}, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	m := regexp.MustCompile(`events 200 .* in ([0-9.]+)s \(([0-9]+) events/s\)`).FindStringSubmatch(o.String())
	if m == nil {
		t.Fatalf("no rate line:\n%s", o.String())
	}
	secs, _ := strconv.ParseFloat(m[1], 64)
	if secs >= idle.Seconds()/2 {
		t.Errorf("run printed %s s spent learning 200 records, after idling %v: the idle time is counted", m[1], idle)
	}
	// The seconds are printed to the millisecond: the rate is 200 over
	// them within half of one.
	if rate, _ := strconv.ParseFloat(m[2], 64); rate < 200/(secs+0.0005) || secs > 0.0005 && rate > 200/(secs-0.0005) {
		t.Errorf("rate %s events/s, want 200 over %s s", m[2], m[1])
	}
}

// TestReplayRateExcludesStdinPause: a replay of standard input whose
// writer pauses between two halves of the demo says it learned for well
// under the pause: waiting for input is not learning.
func TestReplayRateExcludesStdinPause(t *testing.T) {
	data, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	first, rest := strings.Join(lines[:len(lines)/2], ""), strings.Join(lines[len(lines)/2:], "")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pause := 1500 * time.Millisecond
	go func() {
		w.WriteString(first)
		time.Sleep(pause)
		w.WriteString(rest)
		w.Close()
	}()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old; r.Close() }()
	var o, e bytes.Buffer
	start := time.Now()
	if code := Main(context.Background(), []string{"replay", "-c", "../../config.yaml", "-"}, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	wall := time.Since(start)
	m := regexp.MustCompile(`events ([0-9]+) .* in ([0-9.]+)s`).FindStringSubmatch(o.String())
	if m == nil {
		t.Fatalf("no rate line:\n%s", o.String())
	}
	if m[1] != strconv.Itoa(len(lines)) {
		t.Errorf("events %s, want %d", m[1], len(lines))
	}
	// Whatever the machine's speed, learning time that counted the pause
	// would be above the replay's wall time less most of the pause.
	if secs, _ := strconv.ParseFloat(m[2], 64); secs >= (wall - pause*8/10).Seconds() {
		t.Errorf("replay printed %s s spent learning in %v, with a %v pause on standard input: the pause is counted", m[2], wall, pause)
	}
}

// TestSIGTERMWhileLoadingConfig: a command loading its config exits on
// SIGTERM (a config that is a FIFO nobody writes blocks the load forever).
func TestSIGTERMWhileLoadingConfig(t *testing.T) {
	bin, _ := e2eBuild(t)
	fifo := filepath.Join(t.TempDir(), "config.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	cmd := testproc.Command(t, bin, "check", "-c", fifo)
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// In the load: the FIFO opens for writing (without blocking) once the
	// command has it open for reading, which it does after it set up its
	// signals. (A fixed 300ms sleep here let a loaded machine deliver the
	// SIGTERM before, which killed the command with no message.) Holding
	// the write end open, without writing, keeps the load blocked.
	var w *os.File
	started := time.Now()
	for {
		var err error
		if w, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			break
		}
		if !errors.Is(err, syscall.ENXIO) {
			t.Fatal(err)
		}
		if time.Since(started) > 20*time.Second { // a bound on correctness, not a speed claim
			cmd.Process.Kill()
			t.Fatalf("check did not open its config within 20 s: %s", e.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer w.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a bound on correctness, not a speed claim
		cmd.Process.Kill()
		<-done
		t.Fatalf("check did not exit within 20 s of SIGTERM while loading its config: %s", e.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(e.String(), "config.yaml: loading stopped: terminated") {
		t.Errorf("exit %d, stderr %q; want 1 and the load stopped", code, e.String())
	}
}
