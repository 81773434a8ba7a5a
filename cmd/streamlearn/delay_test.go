package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDelayOutput pins what delay writes for a small input of each
// format: the ids (the record's number, or the JSON record's own id), the
// keys (the id, or the record's own key), the messages without their
// labels, and each label event --by messages after its message (the ones
// still due at the end after the last message, in their messages' order),
// none for an unlabeled record.
func TestDelayOutput(t *testing.T) {
	spam := writeFiles(t, map[string]string{"spam.yaml": "input: {positive: [spam], negative: [ham]}\nlearners: [{name: maj, algorithm: majority}]\n"})["spam.yaml"]
	for _, c := range []struct {
		name, args, input, want string
	}{
		{"sms.tsv", "-c " + spam + " --by 1", "spam\tWin CASH now!\nham\tSee you at 5 \"there\"\n\tno label\nham\tok\n",
			`{"id":"m-1","key":"m-1","text":"Win CASH now!"}
{"id":"m-2","key":"m-2","text":"See you at 5 \"there\""}
{"id":"m-1","key":"m-1","label":1}
{"id":"m-3","key":"m-3","text":"no label"}
{"id":"m-2","key":"m-2","label":0}
{"id":"m-4","key":"m-4","text":"ok"}
{"id":"m-4","key":"m-4","label":0}
`},
		{"sms.tsv", "-c " + spam + " --by 0 --id-prefix sms-", "spam\tWin\nham\tSee you\n",
			`{"id":"sms-1","key":"sms-1","text":"Win"}
{"id":"sms-1","key":"sms-1","label":1}
{"id":"sms-2","key":"sms-2","text":"See you"}
{"id":"sms-2","key":"sms-2","label":0}
`},
		{"events.jsonl", "--by 5", `{"label": 1, "text": "a b", "id": "x7", "ts": "2026-11-28T10:00:00Z"}
{"features": {"v": 0.5, "c": "red"}, "label": false, "key": "tenant-2", "note": {"a": [1, 2]}}
{"x": [1, 2], "label": null}
`,
			`{"id":"x7","key":"x7","text":"a b","ts":"2026-11-28T10:00:00Z"}
{"id":"m-2","key":"tenant-2","features":{"v":0.5,"c":"red"},"note":{"a":[1,2]}}
{"id":"m-3","key":"m-3","x":[1,2]}
{"id":"x7","key":"x7","label":1}
{"id":"m-2","key":"tenant-2","label":0}
`},
		// Features by slot: the index of LIBSVM (3 and 2^18+3 are one
		// slot, summed), the hash of a CSV column's name or its
		// categorical value.
		{"a.libsvm", "--by 1", "+1 3:0.5 7:2\n-1 3:1 262147:1.5\n",
			`{"id":"m-1","key":"m-1","features":{"3":0.5,"7":2}}
{"id":"m-2","key":"m-2","features":{"3":2.5}}
{"id":"m-1","key":"m-1","label":1}
{"id":"m-2","key":"m-2","label":0}
`},
		{"b.csv", "--by 1", "len,colour,label\n4,red,1\n,blue,0\n",
			`{"id":"m-1","key":"m-1","features":{"175379":4,"238209":1}}
{"id":"m-2","key":"m-2","features":{"145920":1}}
{"id":"m-1","key":"m-1","label":1}
{"id":"m-2","key":"m-2","label":0}
`},
	} {
		in := writeFiles(t, map[string]string{c.name: c.input})[c.name]
		code, out, errOut := run(t, append(append([]string{"delay"}, strings.Fields(c.args)...), in)...)
		if code != 0 {
			t.Errorf("delay %s %s: exit %d: %s", c.args, c.name, code, errOut)
			continue
		}
		if out != c.want {
			t.Errorf("delay %s %s:\n%s\nwant\n%s", c.args, c.name, out, c.want)
		}
	}
}

// TestDelaySameModel: the stream delay writes, with each label right
// after its message (--by 0), teaches every learner what the labeled file
// does, bit for bit (the same mistakes and state digests), in each format;
// with --by 100 on the demo each label joins its message 100 messages (and
// as many label events) later.
func TestDelaySameModel(t *testing.T) {
	files := writeFiles(t, map[string]string{
		"delayed.yaml": `input: {positive: [spam], negative: [ham]}
features: {text: {ngrams: 2}}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, bias: true}
labels: {delayed: true}
`,
		"sms.tsv":  "spam\tWIN a FREE prize now\nham\tsee you at 5\nspam\tFREE entry, text WIN\nham\tok see you\n\t...\nham\tI'll win\n",
		"a.libsvm": "+1 1:0.5 4:2\n-1 1:-1 2:1.5\n+1 4:1 9:0.25\n-1 2:2\n+1 1:1e-3 4:3\n",
		"b.csv":    "len,colour,label\n4,red,spam\n1,blue,ham\n5,red,spam\n,blue,ham\n3.5,green,spam\n",
	})
	cfg, dir := files["delayed.yaml"], t.TempDir()
	for _, in := range []string{"../../testdata/demo.jsonl", files["sms.tsv"], files["a.libsvm"], files["b.csv"]} {
		stream := filepath.Join(dir, "stream.jsonl")
		if code, _, errOut := run(t, "delay", "-c", cfg, "--by", "0", "-o", stream, in); code != 0 {
			t.Fatalf("delay %s: exit %d: %s", in, code, errOut)
		}
		want, got := replayJSON(t, "-c", cfg, in), replayJSON(t, "-c", cfg, stream)
		if got.Labels == nil || got.Labels.Joined != want.Labeled || got.Labeled != want.Labeled || got.Events != want.Events+want.Labeled {
			t.Errorf("%s: %d events, %d labeled, labels %+v; want %d messages and their %d labels, all joined", in, got.Events, got.Labeled, got.Labels, want.Events, want.Labeled)
		}
		for i, l := range got.Learners {
			w := want.Learners[i]
			if l.Mistakes != w.Mistakes || l.StateSHA256 != w.StateSHA256 {
				t.Errorf("%s: %s: %d mistakes, state %s; want the file's %d, %s", in, l.Name, l.Mistakes, l.StateSHA256, w.Mistakes, w.StateSHA256)
			}
		}
	}
	stream := filepath.Join(dir, "demo100.jsonl")
	if code, _, errOut := run(t, "delay", "-c", cfg, "--by", "100", "-o", stream, "../../testdata/demo.jsonl"); code != 0 {
		t.Fatalf("delay --by 100: exit %d: %s", code, errOut)
	}
	r := replayJSON(t, "-c", cfg, stream)
	// A label comes after the 100 messages that follow its own and the 100
	// labels due before it (fewer for the first ones): 201 records later.
	if l := r.Labels; l == nil || l.Joined != 5000 || l.Delay.Max != 201 {
		t.Errorf("--by 100: labels %+v, want 5000 joined, at most 201 records after their messages", l)
	}
}

// TestDelayErrors: a record the service would reject, a label event in
// the input, several classes and an output that is an input stop delay
// (exit 1) naming what and where; bad flags are usage errors (exit 2).
func TestDelayErrors(t *testing.T) {
	f := writeFiles(t, map[string]string{
		"sms.tsv":      "ham\tok\nspam no tab\n",
		"late.jsonl":   `{"id":"a","text":"x"}` + "\n" + `{"id":"a","label":1}` + "\n",
		"spam.yaml":    "input: {positive: [spam], negative: [ham]}\nlearners: [{name: maj, algorithm: majority}]\n",
		"classes.yaml": "input: {classes: [a, b, c]}\nlearners: [{name: maj, algorithm: majority}]\n",
		// the service holds the first message of an id until its label:
		// a later labeled one of that id would be lost, or its label
		// joined to the earlier one's features
		"twice.jsonl": `{"id":"a","features":{"v":1},"label":1}` + "\n" + `{"id":"a","features":{"v":-1},"label":0}` + "\n",
		"unlabeled.jsonl": `{"id":"x","features":{"v":1}}` + "\n" + `{"id":"x","features":{"v":-1}}` + "\n" +
			`{"id":"x","features":{"v":-1},"label":0}` + "\n",
		"keyed.yaml": "models: {by: key}\nlearners: [{name: maj, algorithm: majority}]\n",
		"keys.jsonl": `{"id":"1","key":"u","features":{"v":1},"label":1}` + "\n" + `{"id":"1","key":"w","features":{"v":-1},"label":0}` + "\n",
	})
	tsv, labels, classes := f["sms.tsv"], f["late.jsonl"], f["classes.yaml"]
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-c", f["spam.yaml"], tsv}, 1, "sms.tsv:2: malformed: no tab between label and text"},
		{[]string{tsv}, 1, `sms.tsv:1: field "label": label: "ham" is not a configured label`},
		{[]string{labels}, 1, "late.jsonl:2: a label event (an id and a label, no features)"},
		{[]string{"-c", classes, tsv}, 1, "delayed labels take two labels"},
		{[]string{"--by", "1", f["twice.jsonl"]}, 1, `twice.jsonl:2: id "a" again while an earlier message of that id still waits for its label`},
		{[]string{"--by", "0", f["twice.jsonl"]}, 0, "delay: 2 messages and 2 labels (--by 0)"}, // the first's label came before
		{[]string{"--by", "0", f["unlabeled.jsonl"]}, 1, `unlabeled.jsonl:3: id "x" again`},     // two unlabeled ones are fine
		{[]string{"--by", "1", f["keys.jsonl"]}, 1, `keys.jsonl:2: id "1" again`},
		{[]string{"-c", f["keyed.yaml"], "--by", "1", f["keys.jsonl"]}, 0, "delay: 2 messages and 2 labels"}, // each key's model holds its own
		{[]string{"-o", tsv, tsv}, 1, "is the input"},
		{[]string{"--by", "-1", tsv}, 2, "--by -1: want a number of messages"},
		{nil, 2, "no input files"},
		{[]string{filepath.Join(filepath.Dir(tsv), "absent.tsv")}, 1, "absent.tsv: no such file"},
	} {
		code, _, errOut := run(t, append([]string{"delay"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("delay %q: exit %d, stderr:\n%s\nwant exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
	// An input that is not there leaves the file of -o as it was.
	kept := f["twice.jsonl"]
	before, err := os.ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := run(t, "delay", "-o", kept, filepath.Join(filepath.Dir(tsv), "absent.tsv")); code != 1 {
		t.Errorf("delay -o of an absent input: exit %d, want 1", code)
	}
	if after, err := os.ReadFile(kept); err != nil || string(after) != string(before) {
		t.Errorf("delay -o %s of an absent input: the file is now %q (%v), was %q", kept, after, err, before)
	}
	// Nor does a bad record after good ones: the output is whole or not
	// there, and nothing is left beside it.
	if code, _, _ := run(t, "delay", "-c", f["spam.yaml"], "-o", kept, tsv); code != 1 {
		t.Errorf("delay -o of an input with a bad record: exit %d, want 1", code)
	}
	if after, err := os.ReadFile(kept); err != nil || string(after) != string(before) {
		t.Errorf("delay -o %s of an input with a bad second record: the file is now %q (%v), was %q", kept, after, err, before)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(kept), ".*.tmp-*")); len(left) != 0 {
		t.Errorf("left beside the output: %v", left)
	}
}
