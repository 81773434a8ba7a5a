package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/testbroker"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

// docCommand is a command of a docs page.
type docCommand struct {
	file    string // the page's name, e.g. operations.md
	line    int    // where the command starts, 1-based
	text    string // the command: prompt, continuations and comment removed
	comment string // the trailing # comment of a fenced line, without "#"
	inline  bool   // a code span of the prose, not a line of a fenced block
	output  []string
	json    bool // the output is a json block
	hasOut  bool // the page shows an output for the command
}

func (c docCommand) String() string { return fmt.Sprintf("docs/%s:%d: %s", c.file, c.line, c.text) }

var (
	envAssign     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	goSubcommands = map[string]bool{"build": true, "run": true, "test": true, "install": true, "vet": true,
		"list": true, "generate": true, "tool": true, "mod": true, "get": true}
	commandWords = map[string]bool{"streamlearn": true, "curl": true, "docker": true, "docker-compose": true,
		"promtool": true, "kcat": true, "nats-server": true}
	shellInfos  = map[string]bool{"sh": true, "bash": true, "shell": true}
	outputInfos = map[string]bool{"": true, "text": true, "console": true, "json": true}
)

// stripEnv drops the VAR=value assignments that begin a command.
func stripEnv(words []string) []string {
	for len(words) > 0 && envAssign.MatchString(words[0]) {
		words = words[1:]
	}
	return words
}

// startsCommand says whether words (a line or a code span) start a
// command: see the rule at the top of the file.
func startsCommand(words []string) bool {
	words = stripEnv(words)
	if len(words) == 0 {
		return false
	}
	switch w := words[0]; {
	case w == "go":
		return len(words) > 1 && goSubcommands[words[1]]
	case w == "source":
		return len(words) > 1 && strings.HasPrefix(words[1], "<(")
	case commandWords[w]:
		return len(words) > 1
	default:
		return strings.HasSuffix(w, ".sh")
	}
}

// cutComment splits a shell line at its first # that starts a word
// outside quotes.
func cutComment(s string) (cmd, comment string) {
	var quote byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '\\':
			i++
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
		}
	}
	return strings.TrimSpace(s), ""
}

type numberedLine struct {
	n    int
	text string
}

// extractDocCommands returns the commands of a page, in page order.
func extractDocCommands(file, src string) []docCommand {
	var cmds []docCommand
	var para []numberedLine
	flush := func() {
		cmds = append(cmds, spanCommands(file, para)...)
		para = nil
	}
	lines := strings.Split(src, "\n")
	prevEnd, prevLast := -1, -1 // the last fence's closing line and its last command's index
	for i := 0; i < len(lines); i++ {
		trim := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(trim, "```") {
			if trim == "" {
				flush()
			} else {
				para = append(para, numberedLine{i + 1, lines[i]})
			}
			continue
		}
		flush()
		info, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(trim, "```")), " ")
		start := i + 1
		var block []numberedLine
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			block = append(block, numberedLine{i + 1, lines[i]})
		}
		before := len(cmds)
		switch {
		case shellInfos[info]:
			cmds = append(cmds, shellBlock(file, block)...)
		case outputInfos[info] && info != "json":
			cmds = append(cmds, promptBlock(file, block)...)
		}
		if len(cmds) == before && outputInfos[info] && prevLast >= 0 && blankBetween(lines, prevEnd, start) && !cmds[prevLast].hasOut {
			c := &cmds[prevLast]
			c.hasOut, c.json = true, info == "json"
			for _, l := range block {
				c.output = append(c.output, l.text)
			}
			c.output = trimBlank(c.output)
		}
		prevEnd, prevLast = i+1, -1
		if len(cmds) > before {
			prevLast = len(cmds) - 1
		}
	}
	flush()
	return cmds
}

// blankBetween says whether the lines after line end and before line
// start (1-based) are all blank.
func blankBetween(lines []string, end, start int) bool {
	if end < 0 {
		return false
	}
	for n := end + 1; n < start; n++ {
		if strings.TrimSpace(lines[n-1]) != "" {
			return false
		}
	}
	return true
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// shellBlock: every line of a sh block is a command.
func shellBlock(file string, block []numberedLine) []docCommand {
	var cmds []docCommand
	for j := 0; j < len(block); j++ {
		n, line := block[j].n, strings.TrimSpace(block[j].text)
		for strings.HasSuffix(line, "\\") && j+1 < len(block) {
			j++
			line = strings.TrimSpace(strings.TrimSuffix(line, "\\")) + " " + strings.TrimSpace(block[j].text)
		}
		line = strings.TrimPrefix(line, "$ ")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		text, comment := cutComment(line)
		cmds = append(cmds, docCommand{file: file, line: n, text: text, comment: comment})
	}
	return cmds
}

// promptBlock: the "$ " lines of an unmarked block and their output, and
// the lines before any that start a command.
func promptBlock(file string, block []numberedLine) []docCommand {
	var cmds []docCommand
	prompt := -1
	for _, l := range block {
		trim := strings.TrimSpace(l.text)
		if rest, ok := strings.CutPrefix(trim, "$ "); ok {
			text, comment := cutComment(rest)
			cmds = append(cmds, docCommand{file: file, line: l.n, text: text, comment: comment, hasOut: true})
			prompt = len(cmds) - 1
			continue
		}
		if prompt >= 0 {
			cmds[prompt].output = append(cmds[prompt].output, strings.TrimRight(l.text, " \t"))
			continue
		}
		if startsCommand(strings.Fields(trim)) {
			text, comment := cutComment(trim)
			cmds = append(cmds, docCommand{file: file, line: l.n, text: text, comment: comment})
		}
	}
	for i := range cmds {
		cmds[i].output = trimBlank(cmds[i].output)
		if len(cmds[i].output) == 0 {
			cmds[i].hasOut = false
		}
	}
	return cmds
}

// spanCommands returns the code spans of a paragraph that start commands.
func spanCommands(file string, para []numberedLine) []docCommand {
	if len(para) == 0 {
		return nil
	}
	var b strings.Builder
	var lineAt []int // the page line of each byte of b
	var table []bool // whether that line is a table row
	for _, l := range para {
		text := strings.TrimSpace(l.text)
		row := strings.HasPrefix(text, "|")
		for range len(text) + 1 {
			lineAt = append(lineAt, l.n)
			table = append(table, row)
		}
		b.WriteString(text)
		b.WriteByte('\n')
	}
	s := b.String()
	var cmds []docCommand
	for i := 0; i < len(s); {
		if s[i] == '\\' {
			i += 2
			continue
		}
		if s[i] != '`' {
			i++
			continue
		}
		k := 0
		for i+k < len(s) && s[i+k] == '`' {
			k++
		}
		end := closingRun(s, i+k, k)
		if end < 0 {
			i += k
			continue
		}
		content := strings.ReplaceAll(s[i+k:end], "\n", " ")
		if table[i] {
			content = strings.ReplaceAll(content, `\|`, "|")
		}
		content = strings.TrimSpace(content)
		if startsCommand(strings.Fields(content)) {
			cmds = append(cmds, docCommand{file: file, line: lineAt[i], text: content, inline: true})
		}
		i = end + k
	}
	return cmds
}

// closingRun returns where the next run of exactly k backticks from i
// starts, or -1.
func closingRun(s string, i, k int) int {
	for i < len(s) {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j-i == k {
			return i
		}
		i = j
	}
	return -1
}

// docsAllowed are the commands that do not run in this test: why, and
// the tests (PACKAGE TestName) that cover them instead, which must exist.
var docsAllowed = map[string]struct {
	why string
	by  []string
}{
	"docker compose up --build": {"needs a container engine, pulls images and runs until stopped; CI has none. The stack is validated instead",
		[]string{"./cmd/streamlearn TestComposeConfig", "./cmd/streamlearn TestComposeServices", "./cmd/streamlearn TestComposeGenerator"}},
	"docker-compose config -q": {"needs docker-compose; the compose test runs exactly this",
		[]string{"./cmd/streamlearn TestComposeConfig"}},
	"bench/vw/compare.sh": {"needs a Vowpal Wabbit binary and the data sets, and takes up to a minute; the test pins its figures",
		[]string{"./internal/pipeline TestAdaGradAgainstVW"}},
	"docs/measure-until-end.sh": {"a measurement: each run waits out Kafka's default rebalance timeouts (tens of seconds); the end-to-end test checks the behaviour with short timeouts",
		[]string{"./cmd/streamlearn TestE2EKafkaUntilEndAfterKills"}},
	"deploy/generator/generate.sh": {"the compose stack's generator, run in its container against the stack's Kafka",
		[]string{"./cmd/streamlearn TestComposeGenerator"}},
	"go list -deps": {"names the tool internal/arch's test runs, on packages it lists",
		[]string{"./internal/arch TestDependenciesPointOneWay"}},
	"go vet":            {".ci/run runs it on every package before the tests (README says what CI checks)", nil},
	"go mod tidy -diff": {".ci/run runs it before the tests (README says what CI checks)", nil},
	"curl -L -o sms.zip https://archive.ics.uci.edu/static/public/228/sms+spam+collection.zip": {"downloads the SMS Spam Collection from the UCI repository; the tests read it in place ($DATA), where their counts of it are pinned",
		[]string{"./internal/event TestRealData", "./internal/pipeline TestRealData"}},
	"unzip sms.zip SMSSpamCollection -d $DATA/sms_spam_collection": {"unpacks the download above; the tests read the file in place",
		[]string{"./internal/event TestRealData"}},
	"promtool check metrics": {"needs promtool and a live /metrics",
		[]string{"./cmd/streamlearn TestPromtoolCheckMetrics"}},
	"promtool check config": {"needs promtool",
		[]string{"./cmd/streamlearn TestPromtoolCheckConfig"}},
	"promtool check rules": {"needs promtool",
		[]string{"./cmd/streamlearn TestPromtoolCheckDashboardQueries"}},
}

// docsExpect checks single commands beyond their exit status and shown
// output, given what they printed.
var docsExpect = map[string]func(t *testing.T, e *docEnv, stdout string){
	"go run ./cmd/streamlearn replay -c config.yaml testdata/demo.jsonl": wantReport(5000),
	"go run ./cmd/streamlearn run -c config.yaml --until-end":            wantReport(5000),
	"go run ./cmd/streamlearn run -c config.yaml --until-end --http off": func(t *testing.T, e *docEnv, stdout string) {
		wantReport(5000)(t, e, stdout)
		if _, err := os.Stat("state/partition-0.ckpt"); err != nil {
			t.Errorf("no checkpoint: %v", err)
		}
	},
	"go run ./cmd/streamlearn run --preload testdata/demo.jsonl --start offset:4001 --until-end": wantReport(1000),
	"streamlearn generate -n 5000 --seed 1": func(t *testing.T, e *docEnv, stdout string) {
		if demo, _ := os.ReadFile("testdata/demo.jsonl"); stdout != string(demo) {
			t.Errorf("%d bytes, not testdata/demo.jsonl's %d", len(stdout), len(demo))
		}
	},
	"go run ./cmd/streamlearn record --kind kafka --brokers 127.0.0.1:9092 --topic events -o events.jsonl": func(t *testing.T, e *docEnv, stdout string) {
		got, err := os.ReadFile("events.jsonl")
		demo, _ := os.ReadFile("testdata/demo.jsonl")
		if err != nil || !bytes.Equal(got, demo) {
			t.Errorf("events.jsonl: %d bytes (%v), want the demo the topic holds (%d bytes)", len(got), err, len(demo))
		}
	},
	"curl -s http://127.0.0.1:8080/v1/report": spamLive,
	"go run ./cmd/streamlearn record --kind kafka --brokers 127.0.0.1:9092 --topic sms-predictions -o predictions.jsonl": func(t *testing.T, e *docEnv, stdout string) {
		data, err := os.ReadFile("predictions.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 5574 || !strings.HasPrefix(lines[0], `{"id":"m-1",`) || !strings.HasPrefix(lines[5573], `{"id":"m-5574",`) {
			t.Errorf("predictions.jsonl: %d lines, first %.60s, want one per message, m-1 to m-5574", len(lines), lines[0])
		}
	},
	"go run ./cmd/streamlearn replay -c config.yaml events.jsonl": func(t *testing.T, e *docEnv, stdout string) {
		// "the same numbers the live run got": the demo's.
		var want, errOut bytes.Buffer
		if code := Main(t.Context(), []string{"replay", "-c", "config.yaml", "testdata/demo.jsonl"}, &want, &errOut); code != 0 {
			t.Fatalf("replay of the demo: exit %d: %s", code, errOut.String())
		}
		if g, w := maskOutput(stdout), maskOutput(want.String()); g != w {
			t.Errorf("not the demo's numbers:\n%s\nwant\n%s", g, w)
		}
	},
	"go run ./cmd/streamlearn generate --noise 0.05 | go run ./cmd/streamlearn replay -c config.yaml --fail-on-violation --junit replay.xml -": func(t *testing.T, e *docEnv, stdout string) {
		xml, err := os.ReadFile("replay.xml")
		if err != nil || !bytes.Contains(xml, []byte(`tests="8" failures="3"`)) {
			t.Errorf("replay.xml (%v): want 8 learners, 3 failed (consistent, halving, soa):\n%.400s", err, xml)
		}
		if !strings.Contains(stdout, "events 5000  labeled 5000") || !strings.Contains(stdout, "premise false") {
			t.Errorf("no bound whose premise is false in the report:\n%s", stdout)
		}
	},
}

// spamLive checks /v1/report (an array of the models' reports) of the
// spam filter's live run (spam-filter.md): the messages and their labels,
// each 100 messages later, all joined, and ada's mistakes, the replay's.
func spamLive(t *testing.T, e *docEnv, body string) {
	var reports []pipeline.Report
	if err := json.Unmarshal([]byte(body), &reports); err != nil {
		t.Fatalf("/v1/report: not an array of reports: %v: %.300s", err, body)
	}
	if len(reports) != 1 {
		t.Fatalf("/v1/report: %d models, want one", len(reports))
	}
	r := reports[0]
	if r.Events != 11148 || r.Labeled != 5574 || r.Labels == nil || r.Labels.Joined != 5574 {
		t.Errorf("live report: events %d labeled %d labels %+v, want 11148, 5574 and 5574 joined", r.Events, r.Labeled, r.Labels)
	}
	for _, l := range r.Learners {
		if l.Name == "ada" && (l.Mistakes != 127 || l.Rounds != 5574) {
			t.Errorf("live report: ada %d mistakes of %d rounds, want 127 of 5574 (97.72%%, the page's)", l.Mistakes, l.Rounds)
		}
	}
}

func wantReport(n int) func(t *testing.T, e *docEnv, stdout string) {
	return func(t *testing.T, e *docEnv, stdout string) {
		if want := fmt.Sprintf("events %d  labeled %d  predicted 0  invalid 0", n, n); !strings.Contains(stdout, want) {
			t.Errorf("no %q in the report:\n%s", want, stdout)
		}
	}
}

// docsOutputs are top-level names the pages' commands write: the mirror
// of the repository leaves them out, in case a manual run left them there.
var docsOutputs = map[string]bool{".git": true, "state": true, "dead-letters.jsonl": true, ".dead-letters.jsonl.lock": true, "replay.xml": true, "events.jsonl": true, "token": true,
	"sms.zip": true, "sms.jsonl": true, "kafka-data": true, "predictions.jsonl": true, "copy-partition-0.jsonl": true}

// sharedDataDir is ../shared/data beside the repository, as the real-data
// tests of internal/pipeline and internal/event find it.
func sharedDataDir() (string, error) {
	dir, err := filepath.Abs("../../../shared/data")
	if err != nil {
		return "", err
	}
	_, err = os.Stat(dir)
	return dir, err
}

// TestDocs runs the commands of docs/*.md, as TestReadmeTour runs
// README.md's.
//
// Which text is a command (extractDocCommands; TestDocsExtract pins it):
//
//   - In a fenced block marked sh, bash or shell: every line but blank
//     lines and # comments. A leading "$ " is dropped, a trailing
//     backslash joins the next line, and a trailing " # comment" is cut
//     off (kept as the command's comment).
//   - In an unmarked fenced block (or text, console): a line beginning
//     with "$ ", and the lines after it up to the next "$ " line are its
//     output; and, before any "$ " line, a line that starts a command
//     (below). Other lines are output or diagrams.
//   - In the prose: a code span that starts a command. Spans are read per
//     paragraph, so a span may run over a line break (read as a space);
//     in a table row `\|` is `|`, as GitHub renders it.
//   - A command starts with, after optional VAR=value assignments: go and
//     one of its subcommands (build, run, test, install, vet, list,
//     generate, tool, mod, get); streamlearn, curl, docker,
//     docker-compose, promtool, kcat or nats-server and at least one more
//     word; source <(...); or a script path ending in .sh. Other programs
//     named in prose (kill -9, openssl) are not taken as commands.
//   - The output a page shows for a command: the "$ " lines' own output as
//     above, or a fenced block (unmarked, text, console or json) separated
//     from the command's block by blank lines only: it is the output of
//     that block's last command.
//
// How each kind runs (docEnv.run), in page order, each page from a
// directory that mirrors the repository's root (a symlink per top-level
// entry), so that relative paths read the repository's files and what the
// commands write (state/, replay.xml, events.jsonl, dead-letters.jsonl,
// token) goes to a temporary directory:
//
//   - go run ./cmd/streamlearn ARGS and streamlearn ARGS: in this process,
//     through Main. run without -c, or with a -c whose source is embedded,
//     gets a free --nats-port and a temporary --store; every run without
//     --http gets a free --http address; a run
//     without --until-end is a service, left in the background until the
//     page is over (it must then exit 0), and the next commands of the
//     page use it: publish and record without -c, --kind or --url get its
//     --url; curl talks to its HTTP address. 127.0.0.1:9092 is an
//     in-process Kafka broker (kfake) holding the demo on topic events, or,
//     once the page started one, its broker process (below); a -c file that
//     names 127.0.0.1:9092 is read from a copy naming that address instead.
//     $DATA the real data sets (../shared/data; a command that needs them
//     skips when they are absent, and when it writes a file (-o), the
//     page's later commands skip too). A pipe A | B runs A into a buffer and
//     gives it to B as its standard input. A trailing comment "# exits N"
//     says the exit status expected; else it is 0.
//   - A streamlearn span of the prose with placeholders (FILE, CONFIG,
//     NAME, [...], a|b ...) is a synopsis: its command and flags must
//     exist (as -h lists them) and a path with a placeholder must match a
//     file. A span of just "streamlearn COMMAND" names the command, which
//     must exist.
//   - go run ./internal/testbroker/kfake ARGS: the broker process, built
//     once per page, with -ports 9092 made a free port, in the background
//     until the page is over; it is the page's 127.0.0.1:9092 from then on.
//   - curl: the request, in this process, against the page's service
//     (with an Authorization header: against a service of its own started
//     with --http-token-file token, which must also refuse the request
//     without it); the answer must be 200.
//   - source <(streamlearn completion bash): the script, sourced by bash.
//   - go test: not run. Every package it names must build and hold, for
//     -run (checked only without -bench) or -bench, at least one test or
//     benchmark that each top-level alternative of the pattern matches,
//     as testing splits it (see goTestPatternMatches; sub-test elements
//     after a / cannot be known without running). The names come from one
//     `go test -list . PKG...` of all the packages the pages name.
//   - docsAllowed: commands that cannot run here, each with its reason and
//     the tests that cover it, which must exist. Their scripts must exist,
//     be executable and pass bash -n.
//   - Anything else fails the test, naming the page and the line.
//
// What is checked beyond the exit status: a shown text output must match
// the start of the real one line by line, "…" standing for any lines,
// once timings ("in 0.012s (431043 events/s)"), dates, byte sizes and
// check's measured memory per model are masked; a shown JSON output must equal the real one but for the keys
// seconds and model_time. docsExpect adds checks for single commands (the
// demo's last 1,000 events, the record of the Kafka topic equal to the
// demo, ...). Every entry of docsAllowed and docsExpect must still match a
// command of the pages. The checks of go test commands and of the tests
// docsAllowed names run last (subtest go-test-list), once the listing,
// started first, is done.
func TestDocs(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	data, dataErr := sharedDataDir()
	var all []docCommand
	for _, p := range pages {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, extractDocCommands(filepath.Base(p), string(src))...)
	}
	if len(all) < 40 {
		t.Fatalf("%d commands in docs/*.md; the extraction lost some", len(all))
	}
	// README.md's fenced commands are TestReadmeTour's; its prose's
	// commands (benchmarks quoted with their figures) are checked here.
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range extractDocCommands("../README.md", string(readme)) {
		if c.inline {
			all = append(all, c)
		}
	}

	// The names of the packages that go test commands and the allow-list
	// name, listed while the streamlearn commands run.
	var pkgs []string
	for _, c := range all {
		if words := strings.Fields(c.text); classify(c) == kindGoTest {
			if g, err := parseGoTest(words); err == nil {
				pkgs = append(pkgs, g.pkgs...)
			}
		}
		if a, ok := docsAllowed[c.text]; ok {
			for _, by := range a.by {
				pkgs = append(pkgs, strings.Fields(by)[0])
			}
		}
	}

	var named []func(t *testing.T, names map[string][]string)
	for _, p := range append(pages, "../README.md") {
		name := filepath.Base(p)
		if p == "../README.md" {
			name = p
		}
		t.Run(name, func(t *testing.T) {
			e := newDocEnv(t, repo, data, dataErr, &named)
			for _, c := range all {
				if c.file == name {
					t.Run(strconv.Itoa(c.line), func(t *testing.T) { e.run(t, c) })
				}
			}
		})
	}
	// The checks of test names, once go test -list is done: it ran while
	// the pages did.
	t.Run("go-test-list", func(t *testing.T) {
		names, err := listTests(repo, pkgs)
		if err != nil {
			t.Fatal(err)
		}
		for _, check := range named {
			check(t, names)
		}
	})
	texts := map[string]bool{}
	for _, c := range all {
		texts[c.text] = true
	}
	for text := range docsAllowed {
		if !texts[text] {
			t.Errorf("docsAllowed: %q is no command of docs/*.md any more; remove it", text)
		}
	}
	for text := range docsExpect {
		if !texts[text] {
			t.Errorf("docsExpect: %q is no command of docs/*.md any more; update it", text)
		}
	}
}

type docKind int

const (
	kindUnknown docKind = iota
	kindAllowed
	kindGoTest
	kindCurl
	kindSource
	kindMention
	kindSynopsis
	kindStreamlearn
	kindBroker
)

// placeholders are the words of a synopsis that stand for a value.
var placeholders = map[string]bool{"FILE": true, "FILES": true, "DIR": true, "CONFIG": true, "NAME": true,
	"ADDR": true, "PATH": true, "TOKEN": true, "CHECKPOINT": true, "MODEL": true, "ACC": true, "N": true, "D": true, "P": true, "S": true}

// streamlearnArgs returns the arguments of a streamlearn command (go run
// ./cmd/streamlearn ARGS, or streamlearn ARGS), and whether it is one.
func streamlearnArgs(words []string) ([]string, bool) {
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/streamlearn":
		return words[3:], true
	case len(words) >= 1 && words[0] == "streamlearn":
		return words[1:], true
	}
	return nil, false
}

// isSynopsis says whether the words of a span hold placeholders.
func isSynopsis(args []string) bool {
	for _, a := range args {
		if strings.ContainsAny(a, "[]…") || strings.Contains(a, "...") {
			return true
		}
		if !strings.HasPrefix(a, "-") && strings.Contains(a, "|") {
			return true
		}
		for _, part := range strings.FieldsFunc(a, func(r rune) bool { return strings.ContainsRune("/.|=:", r) }) {
			if placeholders[part] {
				return true
			}
		}
	}
	return false
}

// classify says how a command runs.
func classify(c docCommand) docKind {
	if _, ok := docsAllowed[c.text]; ok {
		return kindAllowed
	}
	words := strings.Fields(c.text)
	words = stripEnv(words)
	if len(words) == 0 {
		return kindUnknown
	}
	switch {
	case len(words) > 1 && words[0] == "go" && words[1] == "test":
		return kindGoTest
	case len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "./internal/testbroker/kfake":
		return kindBroker
	case words[0] == "curl":
		return kindCurl
	case words[0] == "source" && len(words) > 1 && strings.HasPrefix(words[1], "<(streamlearn") && strings.HasSuffix(c.text, ")"):
		return kindSource
	}
	if args, ok := streamlearnArgs(words); ok && c.inline && len(args) == 1 {
		return kindMention
	} else if ok && c.inline && isSynopsis(args) { // before the pipes: DIR|FILE is none
		return kindSynopsis
	}
	for _, st := range splitPipes(strings.Join(words, " ")) {
		if args, ok := streamlearnArgs(strings.Fields(st)); !ok || len(args) == 0 {
			return kindUnknown
		}
	}
	return kindStreamlearn
}

// splitPipes splits a shell command at the | outside quotes.
func splitPipes(s string) []string {
	var stages []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '\\':
			i++
		case c == '|':
			stages = append(stages, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(stages, strings.TrimSpace(s[start:]))
}

// shellWords splits a command into words as sh does for the pages'
// commands: blanks separate words, '...' quotes, "..." quotes with $
// expanded, a backslash outside quotes escapes. $NAME, ${NAME} and $(...)
// outside single quotes are given to expand, with the name or the
// command between the parentheses.
func shellWords(s string, expand func(string) (string, error)) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false // a word is under way
	dollar := func(i int) (int, error) {
		var name string
		switch {
		case i+1 < len(s) && s[i+1] == '(':
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				return 0, fmt.Errorf("unclosed $( in %q", s)
			}
			name, i = s[i+2:i+end], i+end+1
		case i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return 0, fmt.Errorf("unclosed ${ in %q", s)
			}
			name, i = s[i+2:i+end], i+end+1
		default:
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			if j == i+1 { // a lone $
				w.WriteByte('$')
				return i + 1, nil
			}
			name, i = s[i+1:j], j
		}
		if expand == nil {
			return 0, fmt.Errorf("$%s: nothing to expand it with", name)
		}
		v, err := expand(name)
		if err != nil {
			return 0, err
		}
		w.WriteString(v)
		return i, nil
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
			i++
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+end])
			in, i = true, i+end+2
		case c == '"':
			in = true
			i++
			for i < len(s) && s[i] != '"' {
				switch {
				case s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0:
					w.WriteByte(s[i+1])
					i += 2
				case s[i] == '$':
					var err error
					if i, err = dollar(i); err != nil {
						return nil, err
					}
				default:
					w.WriteByte(s[i])
					i++
				}
			}
			if i >= len(s) {
				return nil, fmt.Errorf(`unclosed " in %q`, s)
			}
			i++
		case c == '\\' && i+1 < len(s):
			w.WriteByte(s[i+1])
			in, i = true, i+2
		case c == '$':
			in = true
			var err error
			if i, err = dollar(i); err != nil {
				return nil, err
			}
		default:
			w.WriteByte(c)
			in, i = true, i+1
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

// docEnv is what the commands of a page share.
type docEnv struct {
	t       *testing.T // the page's
	ctx     context.Context
	data    string
	dataErr error
	// named are the checks of test names, run once go test -list is done.
	named    *[]func(t *testing.T, names map[string][]string)
	live     *docService   // the page's last service (a run without --until-end)
	token    *docService   // the service of the curl commands with a token
	services []*docService // all of them, stopped when the page is over
	kafka    string        // the Kafka fixture's address, once started
	broker   string        // the address of the page's Kafka broker process, once started
	repo     string        // the repository's root
	// missing: a command that needed the real data sets, absent, was
	// skipped and would have written a file: the page's later commands
	// skip too.
	missing bool
}

// docService is a run left in the background.
type docService struct {
	what   string
	http   string
	nats   int
	events int    // published into it so far
	header string // the Authorization header it wants, if any
	done   chan int
	stderr syncBuffer
}

func newDocEnv(t *testing.T, repo, data string, dataErr error, named *[]func(*testing.T, map[string][]string)) *docEnv {
	work := t.TempDir()
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if !docsOutputs[en.Name()] {
			if err := os.Symlink(filepath.Join(repo, en.Name()), filepath.Join(work, en.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Chdir(work)
	ctx, stop := context.WithCancel(context.Background())
	e := &docEnv{t: t, ctx: ctx, data: data, dataErr: dataErr, named: named, repo: repo}
	// Registered after TempDir and Chdir, so it runs before them: the
	// services drain (SIGINT's path) and must exit 0.
	t.Cleanup(func() {
		stop()
		for _, s := range e.services {
			select {
			case code := <-s.done:
				if code != 0 {
					t.Errorf("%s: exit %d when stopped:\n%s", s.what, code, s.stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Errorf("%s: still running 30s after it was stopped", s.what)
			}
		}
	})
	return e
}

// run runs a command of the page.
func (e *docEnv) run(t *testing.T, c docCommand) {
	t.Logf("%s", c)
	kind := classify(c)
	if (strings.Contains(c.text, "$DATA") || strings.Contains(c.text, "shared/data")) && e.dataErr != nil {
		if words := strings.Fields(c.text); slices.Contains(words, "-o") {
			e.missing = true
		}
		t.Skipf("real data sets not available: %v", e.dataErr)
	}
	if e.missing {
		t.Skipf("a command before it needed the real data sets, which are not available: %v", e.dataErr)
	}
	switch kind {
	case kindBroker:
		e.startBroker(t, c)
	case kindAllowed:
		e.allowed(t, c)
	case kindGoTest:
		e.goTest(t, c)
	case kindCurl:
		body := e.curl(t, c)
		if check, ok := docsExpect[c.text]; ok && !t.Failed() {
			check(t, e, body)
		}
	case kindSource:
		e.source(t, c)
	case kindMention, kindSynopsis:
		e.synopsis(t, c)
	case kindStreamlearn:
		stdout := e.streamlearn(t, c)
		if check, ok := docsExpect[c.text]; ok && !t.Failed() {
			check(t, e, stdout)
		}
	default:
		t.Fatalf("%s: no rule of docs_test.go runs this command: run it there, or add it to docsAllowed with the reason it cannot run", c)
	}
}

// expand gives the values of $DATA and $(cat FILE).
func (e *docEnv) expand(name string) (string, error) {
	switch {
	case name == "DATA":
		return e.data, e.dataErr
	case strings.HasPrefix(name, "cat "):
		b, err := os.ReadFile(strings.TrimSpace(strings.TrimPrefix(name, "cat ")))
		return strings.TrimSpace(string(b)), err
	}
	return "", fmt.Errorf("$%s: docs_test.go does not know what to expand it to", name)
}

// servesHTTP says whether `streamlearn run ARGS...` (args[0] "run")
// serves HTTP without an --http flag: without -c it does, with -c when the
// file sets http.addr (a file that does not load serves none).
func servesHTTP(args []string) bool {
	i := slices.Index(args, "-c")
	if i < 0 || i+1 == len(args) {
		return true
	}
	cfg, err := config.Load(args[i+1])
	return err == nil && cfg.HTTP.Addr != ""
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// kafkaFixture starts, once per page, the Kafka broker that stands for the
// pages' 127.0.0.1:9092: topic events, holding the demo.
func (e *docEnv) kafkaFixture(t *testing.T) string {
	if e.kafka == "" {
		addr := testbroker.Kafka(e.t, 1, "events")[0]
		var out, errOut bytes.Buffer
		if code := Main(t.Context(), []string{"publish", "--kind", "kafka", "--brokers", addr, "--topic", "events", "testdata/demo.jsonl"}, &out, &errOut); code != 0 {
			t.Fatalf("the Kafka fixture: publish: exit %d: %s", code, errOut.String())
		}
		e.kafka = addr
	}
	return e.kafka
}

// kafkaAddr is the address that stands for the pages' 127.0.0.1:9092:
// the page's broker process once a command started it, else the Kafka
// fixture.
func (e *docEnv) kafkaAddr(t *testing.T) string {
	if e.broker != "" {
		return e.broker
	}
	return e.kafkaFixture(t)
}

// config returns the configuration file a command is given as path: the
// file itself, or, when its source reads Kafka at 127.0.0.1:9092, a copy
// of it with that address replaced as in the arguments; and whether its
// source is an embedded server (whose run, like a run without -c, gets a
// free port and a temporary store).
func (e *docEnv) config(t *testing.T, c docCommand, path string) (string, bool) {
	cfg, err := config.Load(path)
	if err != nil {
		return path, false // the command's own error says it
	}
	if !slices.Contains(cfg.Source.Brokers, "127.0.0.1:9092") {
		return path, cfg.Source.Kind == "embedded"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	cp := filepath.Join(e.t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(cp, bytes.ReplaceAll(data, []byte("127.0.0.1:9092"), []byte(e.kafkaAddr(t))), 0o644); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	return cp, false
}

// startBroker runs `go run ./internal/testbroker/kfake ARGS`: the broker
// process, built once, on a free port instead of -ports's, in the
// background until the page is over. It stands for 127.0.0.1:9092 in the
// page's later commands.
func (e *docEnv) startBroker(t *testing.T, c docCommand) {
	words, err := shellWords(c.text, e.expand)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	args := slices.Clone(words[3:])
	for i, a := range args {
		if (a == "-ports" || a == "--ports") && i+1 < len(args) {
			if args[i+1] != "9092" {
				t.Fatalf("%s: -ports %s: the pages' broker is 127.0.0.1:9092", c, args[i+1])
			}
			args[i+1] = "0"
		}
	}
	bin := filepath.Join(e.t.TempDir(), "kfake")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	build := testproc.CommandContext(t, t.Context(), goTool, "build", "-o", bin, "./internal/testbroker/kfake")
	build.Dir = e.repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: go build: %v\n%s", c, err, out)
	}
	cmd := testproc.CommandContext(e.t, e.ctx, bin, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	e.t.Cleanup(func() { // before the page's services stop: none of them reads Kafka
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			e.t.Errorf("%s: still running 10s after SIGTERM", c)
			cmd.Process.Kill()
		}
	})
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addr <- strings.TrimSpace(line)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case e.broker = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: printed no address in 30s:\n%s", c, stderr.String())
	}
	if _, _, err := net.SplitHostPort(e.broker); err != nil {
		t.Fatalf("%s: printed %q, not host:port: %v\n%s", c, e.broker, err, stderr.String())
	}
}

// args rewrites a streamlearn command's arguments for the test: free
// ports, the fixtures' addresses. background says the run is a service.
func (e *docEnv) args(t *testing.T, c docCommand, args []string) (out []string, background bool, svc *docService) {
	out = slices.Clone(args)
	for i, a := range out {
		if strings.HasPrefix(a, "../shared/data") { // the real data sets, as $DATA
			out[i] = e.data + strings.TrimPrefix(a, "../shared/data")
		}
		if strings.Contains(a, "127.0.0.1:9092") {
			out[i] = strings.ReplaceAll(a, "127.0.0.1:9092", e.kafkaAddr(t))
		}
		if strings.Contains(a, "127.0.0.1:4222") {
			if e.live == nil || e.live.nats == 0 {
				t.Fatalf("%s: names 127.0.0.1:4222 with no embedded server of a run before it in the page", c)
			}
			out[i] = strings.ReplaceAll(a, "127.0.0.1:4222", fmt.Sprintf("127.0.0.1:%d", e.live.nats))
		}
	}
	embedded := false
	for i := 1; i < len(out); i++ {
		if out[i] == "-c" && i+1 < len(out) {
			out[i+1], embedded = e.config(t, c, out[i+1])
		}
	}
	switch out[0] {
	case "run":
		svc = &docService{what: c.String()}
		if !hasFlag(out, "c") || embedded {
			if !hasFlag(out, "nats-port") {
				svc.nats = freePort(t)
				out = append(out, "--nats-port", strconv.Itoa(svc.nats))
			}
			if !hasFlag(out, "store") {
				out = append(out, "--store", e.t.TempDir())
			}
		}
		for i := 0; i < len(out); i++ { // a page's address: a free one
			name, value, eq := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
			if !strings.HasPrefix(out[i], "-") || name != "http" {
				continue
			}
			if !eq && i+1 < len(out) {
				i++
				value = out[i]
			}
			if value != "off" {
				svc.http = fmt.Sprintf("127.0.0.1:%d", freePort(t))
				out[i] = svc.http
				if eq {
					out[i] = "--http=" + svc.http
				}
			}
		}
		// A run serves HTTP without -c, or when its file sets http.addr:
		// on a free port then. One that serves none gets none, so that a
		// page whose next commands ask it for HTTP fails here too.
		if !hasFlag(out, "http") && servesHTTP(out) {
			svc.http = fmt.Sprintf("127.0.0.1:%d", freePort(t))
			out = append(out, "--http", svc.http)
		}
		background = !hasFlag(out, "until-end")
	case "publish", "record":
		if !hasFlag(out, "c") && !hasFlag(out, "kind") && !hasFlag(out, "url") {
			if e.live == nil || e.live.nats == 0 {
				t.Fatalf("%s: %s into the embedded server, with no run serving one before it in the page", c, out[0])
			}
			out = append(out[:1], append([]string{"--url", fmt.Sprintf("nats://127.0.0.1:%d", e.live.nats)}, out[1:]...)...)
		}
	}
	return out, background, svc
}

// wantExit is the exit status a command's comment announces ("exits 1:
// ..."), else 0.
func wantExit(c docCommand) int {
	if m := regexp.MustCompile(`^exits? (\d+)\b`).FindStringSubmatch(c.comment); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// streamlearn runs a streamlearn command, or a pipe of them, and returns
// what the last printed.
func (e *docEnv) streamlearn(t *testing.T, c docCommand) string {
	stages := splitPipes(c.text)
	var stdin []byte
	var stdout string
	for i, st := range stages {
		words, err := shellWords(st, e.expand)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		for len(words) > 0 && envAssign.MatchString(words[0]) {
			name, value, _ := strings.Cut(words[0], "=")
			t.Setenv(name, value)
			words = words[1:]
		}
		args, _ := streamlearnArgs(words)
		args, background, svc := e.args(t, c, args)
		if background {
			if len(stages) > 1 {
				t.Fatalf("%s: a service in a pipe", c)
			}
			e.startService(t, svc, args)
			return ""
		}
		var out, errOut bytes.Buffer
		code := withStdin(t, stdin, i > 0, func() int { return Main(t.Context(), args, &out, &errOut) })
		want := 0
		if i == len(stages)-1 {
			want = wantExit(c)
		}
		if code != want {
			t.Fatalf("%s: %s: exit %d, want %d:\n%s%s", c, strings.Join(args, " "), code, want, out.String(), errOut.String())
		}
		stdin, stdout = out.Bytes(), out.String()
		if args[0] == "publish" && e.live != nil && e.live.nats != 0 && slices.Contains(args, fmt.Sprintf("nats://127.0.0.1:%d", e.live.nats)) {
			// Into the page's service: wait until it has learned them.
			for _, m := range regexp.MustCompile(`published (\d+) records`).FindAllStringSubmatch(out.String(), -1) {
				n, _ := strconv.Atoi(m[1])
				e.live.events += n
			}
			waitReport(t, e.live.http, e.live.events)
		}
	}
	if c.hasOut {
		e.sameOutput(t, c, stdout)
	}
	return stdout
}

// withStdin runs f with data as the standard input (with piped), as the
// second command of a pipe reads it.
func withStdin(t *testing.T, data []byte, piped bool, f func() int) int {
	if !piped {
		return f()
	}
	path := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	old := os.Stdin
	os.Stdin = in
	defer func() { os.Stdin = old }()
	return f()
}

// startService starts a run in the background, until the page is over,
// and makes it the page's service once it serves HTTP.
func (e *docEnv) startService(t *testing.T, svc *docService, args []string) {
	if svc.http == "" {
		t.Fatalf("%s: a service without HTTP: the test cannot tell when it is up", svc.what)
	}
	svc.done = make(chan int, 1)
	e.services = append(e.services, svc)
	go func() { svc.done <- Main(e.ctx, args, io.Discard, &svc.stderr) }()
	waitHTTP(t, svc.http, &svc.stderr)
	e.live = svc
}

// tokenService starts, once per page, the service a curl command with a
// token talks to: a run with --http-token-file token that has learned the
// demo.
func (e *docEnv) tokenService(t *testing.T) *docService {
	if e.token != nil {
		return e.token
	}
	token := make([]byte, 32)
	rand.Read(token)
	if err := os.WriteFile("token", []byte(hex.EncodeToString(token)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc := &docService{what: "run --http-token-file token (for the curl commands with a token)",
		http: fmt.Sprintf("127.0.0.1:%d", freePort(t)), nats: freePort(t), header: "Bearer " + hex.EncodeToString(token)}
	args := []string{"run", "--nats-port", strconv.Itoa(svc.nats), "--store", e.t.TempDir(), "--http", svc.http,
		"--http-token-file", "token", "--preload", "testdata/demo.jsonl"}
	svc.done = make(chan int, 1)
	e.services = append(e.services, svc)
	go func() { svc.done <- Main(e.ctx, args, io.Discard, &svc.stderr) }()
	waitHTTP(t, svc.http, &svc.stderr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", "http://"+svc.http+"/v1/report", nil)
		req.Header.Set("Authorization", svc.header)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if bytes.Contains(b, []byte(`"events":5000`)) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: has not learned the demo after 30s:\n%s", svc.what, svc.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.token = svc
	return svc
}

// curl does what a page's curl command does, in this process, and
// returns the answer's body.
func (e *docEnv) curl(t *testing.T, c docCommand) string {
	var svc *docService
	if strings.Contains(c.text, "Authorization: Bearer") {
		svc = e.tokenService(t)
	} else if svc = e.live; svc == nil {
		t.Fatalf("%s: curl with no service before it in the page", c)
	}
	if stages := splitPipes(c.text); len(stages) > 1 {
		t.Fatalf("%s: docs_test.go runs no pipe from curl", c)
	}
	words, err := shellWords(c.text, e.expand)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	var url, data string
	header := http.Header{}
	for i := 1; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-s" || w == "--silent" || w == "-S" || w == "-sS" || w == "-f" || w == "--fail":
		case (w == "-H" || w == "--header") && i+1 < len(words):
			k, v, _ := strings.Cut(words[i+1], ":")
			header.Add(k, strings.TrimSpace(v))
			i++
		case (w == "-d" || w == "--data") && i+1 < len(words):
			data = words[i+1]
			i++
		case strings.HasPrefix(w, "-"):
			t.Fatalf("%s: docs_test.go does not know curl's %s", c, w)
		default:
			u := strings.TrimPrefix(strings.TrimPrefix(w, "http://"), "https://")
			host, path, _ := strings.Cut(u, "/")
			if host != "localhost:8080" && host != "127.0.0.1:8080" {
				t.Fatalf("%s: %s is not the service's address (localhost:8080)", c, w)
			}
			url = "http://" + svc.http + "/" + path
		}
	}
	if url == "" {
		t.Fatalf("%s: no URL", c)
	}
	do := func(header http.Header) (*http.Response, string) {
		method, body := "GET", io.Reader(nil)
		if data != "" {
			method, body = "POST", strings.NewReader(data)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header.Clone()
		if data != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // curl -d's
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := do(header)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s: %s", c, resp.Status, body)
	}
	if svc.header != "" {
		if header.Get("Authorization") != svc.header {
			t.Errorf("%s: the header sent is not the token's", c)
		}
		header.Del("Authorization")
		if resp, body := do(header); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: without the token: %s, want 401: %s", c, resp.Status, body)
		}
	}
	if c.hasOut {
		e.sameOutput(t, c, body)
	}
	return body
}

// source runs `source <(streamlearn ...)`: the script, sourced by bash.
func (e *docEnv) source(t *testing.T, c docCommand) {
	inner := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(c.text, "source")), "<("), ")")
	words, err := shellWords(inner, nil)
	if err != nil {
		t.Fatal(err)
	}
	args, _ := streamlearnArgs(words)
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), args, &out, &errOut); code != 0 {
		t.Fatalf("%s: exit %d: %s", c, code, errOut.String())
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := filepath.Join(t.TempDir(), "completion")
	if err := os.WriteFile(script, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := testproc.Command(t, bash, "-c", fmt.Sprintf("source %q && complete -p streamlearn", script)).CombinedOutput()
	if err != nil || !strings.Contains(string(got), "streamlearn") {
		t.Errorf("%s: bash: %v: %s", c, err, got)
	}
}

// flagsOf returns the flags a command's -h lists, or an error when there
// is no such command.
func flagsOf(t *testing.T, command string) (map[string]bool, error) {
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{command, "-h"}, &out, &errOut); code != 0 {
		return nil, fmt.Errorf("streamlearn %s -h: exit %d: %s", command, code, errOut.String())
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(errOut.String(), -1) {
		flags[m[1]] = true
	}
	return flags, nil
}

// synopsis checks a command named in prose, or its synopsis: the command
// and its flags exist, and a path with a placeholder matches a file.
func (e *docEnv) synopsis(t *testing.T, c docCommand) {
	args, _ := streamlearnArgs(stripEnv(strings.Fields(c.text)))
	flags, err := flagsOf(t, args[0])
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	for _, a := range args[1:] {
		a = strings.Trim(a, "[]")
		for _, f := range strings.Split(a, "|") {
			if !strings.HasPrefix(f, "-") {
				continue
			}
			if name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "="); !flags[name] {
				t.Errorf("%s: streamlearn %s has no flag %s", c, args[0], f)
			}
		}
		if !strings.HasPrefix(a, "-") && strings.Contains(a, "/") {
			pattern := a
			for p := range placeholders {
				pattern = regexp.MustCompile(`\b`+p+`\b`).ReplaceAllString(pattern, "*")
			}
			if m, _ := filepath.Glob(pattern); len(m) == 0 {
				t.Errorf("%s: no file matches %s", c, a)
			}
		}
	}
}

// allowed checks what can be checked of an allow-listed command: the
// tests that cover it exist, its scripts exist, are executable and parse.
func (e *docEnv) allowed(t *testing.T, c docCommand) {
	a := docsAllowed[c.text]
	t.Logf("not run: %s", a.why)
	*e.named = append(*e.named, func(t *testing.T, names map[string][]string) {
		for _, by := range a.by {
			pkg, test, _ := strings.Cut(by, " ")
			if !slices.Contains(names[goPackage(pkg)], test) {
				t.Errorf("%s: allow-listed as covered by %s, which is no test of %s", c, test, pkg)
			}
		}
	})
	for _, w := range strings.Fields(c.text) {
		if !strings.HasSuffix(w, ".sh") {
			continue
		}
		st, err := os.Stat(w)
		if err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s: %s: not an executable file (%v)", c, w, err)
			continue
		}
		if bash, err := exec.LookPath("bash"); err == nil {
			if out, err := testproc.Command(t, bash, "-n", w).CombinedOutput(); err != nil {
				t.Errorf("%s: bash -n %s: %v: %s", c, w, err, out)
			}
		}
	}
}

// outputMasks hide what changes from run to run in a text output.
var outputMasks = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`in [0-9.]+s \([0-9]+ events/s\)`), "in (duration)"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "(date)"},
	{regexp.MustCompile(`\b\d+ bytes\b`), "(size) bytes"},
	// check measures a model's heap by building one: a measurement, which
	// the tests running beside it (and -race) move by a MiB or so.
	{regexp.MustCompile(`[0-9.]+ (MiB|KiB) of memory per model`), "(memory) of memory per model"},
}

func maskOutput(s string) string {
	for _, m := range outputMasks {
		s = m.re.ReplaceAllString(s, m.repl)
	}
	return s
}

// maskedJSONKeys are the keys of a JSON output that hold timings and dates.
var maskedJSONKeys = map[string]bool{"seconds": true, "model_time": true}

func dropKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k := range v {
			if maskedJSONKeys[k] {
				delete(v, k)
			} else {
				v[k] = dropKeys(v[k])
			}
		}
	case []any:
		for i := range v {
			v[i] = dropKeys(v[i])
		}
	}
	return v
}

// sameOutput compares what a command printed with what its page shows.
func (e *docEnv) sameOutput(t *testing.T, c docCommand, got string) {
	shown := strings.Join(c.output, "\n")
	if c.json {
		var want, have any
		if err := json.Unmarshal([]byte(shown), &want); err != nil {
			t.Fatalf("%s: the page's output is not JSON: %v", c, err)
		}
		if err := json.Unmarshal([]byte(got), &have); err != nil {
			t.Fatalf("%s: the output is not JSON: %v\n%s", c, err, got)
		}
		if !reflect.DeepEqual(dropKeys(want), dropKeys(have)) {
			t.Errorf("%s: the output is not the page's (but for %v):\n%s\nthe page shows\n%s", c, slices.Sorted(maps.Keys(maskedJSONKeys)), got, shown)
		}
		return
	}
	if err := matchLines(strings.Split(maskOutput(shown), "\n"), strings.Split(maskOutput(got), "\n")); err != nil {
		t.Errorf("%s: the output is not the page's: %v\ngot:\n%s", c, err, got)
	}
}

// matchLines says whether the shown lines match the start of the real
// ones, a line "…" standing for any number of lines.
func matchLines(shown, got []string) error {
	j := 0
	for i := 0; i < len(shown); i++ {
		want := strings.TrimRight(shown[i], " \t")
		if strings.TrimSpace(want) == "…" {
			if i+1 == len(shown) {
				return nil
			}
			next := strings.TrimRight(shown[i+1], " \t")
			for j < len(got) && strings.TrimRight(got[j], " \t") != next {
				j++
			}
			continue
		}
		if j >= len(got) {
			return fmt.Errorf("line %d of the page's output, %q: the output has ended", i+1, want)
		}
		if g := strings.TrimRight(got[j], " \t"); g != want {
			return fmt.Errorf("line %d of the page's output:\n  page: %q\n  real: %q", i+1, want, g)
		}
		j++
	}
	return nil
}

// goTest is a go test command of a page.
type goTest struct {
	pkgs       []string
	run, bench string
	hasRun     bool
	hasBench   bool
}

// goTestValueFlags are the go test flags the pages may give, with
// whether each takes a value; keyed.sizes and keyed.dir are BenchmarkKeyedReplay's own.
var goTestValueFlags = map[string]bool{"run": true, "bench": true, "count": true, "benchtime": true, "cpu": true,
	"timeout": true, "tags": true, "shuffle": true, "skip": true, "v": false, "race": false, "short": false,
	"benchmem": false, "failfast": false, "keyed.sizes": true, "keyed.dir": true}

func parseGoTest(words []string) (goTest, error) {
	var g goTest
	words = stripEnv(words)
	if len(words) < 2 || words[0] != "go" || words[1] != "test" {
		return g, errors.New("not a go test command")
	}
	for i := 2; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			if strings.Contains(w, "...") || !strings.HasPrefix(w, "./") {
				return g, fmt.Errorf("package %s: docs_test.go checks only ./dir packages", w)
			}
			g.pkgs = append(g.pkgs, w)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		takes, ok := goTestValueFlags[name]
		if !ok {
			return g, fmt.Errorf("go test flag %s: not one docs_test.go knows", w)
		}
		if takes && !hasValue {
			if i+1 == len(words) {
				return g, fmt.Errorf("go test flag %s: no value", w)
			}
			i++
			value = words[i]
		}
		switch name {
		case "run":
			g.run, g.hasRun = value, true
		case "bench":
			g.bench, g.hasBench = value, true
		}
	}
	if len(g.pkgs) == 0 {
		return g, errors.New("no package: docs_test.go checks commands that name theirs")
	}
	return g, nil
}

// splitTestPattern splits a -run or -bench pattern as package testing
// does: alternatives at the top-level |, each a list of elements at the
// top-level / (one per level of subtests).
func splitTestPattern(s string) [][]string {
	var alts [][]string
	var elems []string
	cs, cp := 0, 0
	for i := 0; i < len(s); {
		switch s[i] {
		case '[':
			cs++
		case ']':
			if cs--; cs < 0 {
				cs = 0
			}
		case '(':
			if cs == 0 {
				cp++
			}
		case ')':
			if cs == 0 {
				cp--
			}
		case '\\':
			i++
		case '/', '|':
			if cs == 0 && cp == 0 {
				elems = append(elems, s[:i])
				if s[i] == '|' {
					alts = append(alts, elems)
					elems = nil
				}
				s = s[i+1:]
				i = 0
				continue
			}
		}
		i++
	}
	return append(alts, append(elems, s))
}

// goTestPatternMatches checks a -run or -bench pattern against the
// top-level names of a package (prefix Test or Benchmark): every
// alternative's first element must match one.
func goTestPatternMatches(pattern string, names []string, prefixes ...string) error {
	var own []string
	for _, n := range names {
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) {
				own = append(own, n)
			}
		}
	}
	for _, alt := range splitTestPattern(pattern) {
		re, err := regexp.Compile(alt[0])
		if err != nil {
			return fmt.Errorf("%q: %v", pattern, err)
		}
		if !slices.ContainsFunc(own, re.MatchString) {
			return fmt.Errorf("%q matches none of its %d %s names (%s)", alt[0], len(own), strings.Join(prefixes, "/"), strings.Join(own, ", "))
		}
	}
	return nil
}

// goTest checks a go test command without running it.
func (e *docEnv) goTest(t *testing.T, c docCommand) {
	words, err := shellWords(c.text, func(string) (string, error) { return "", errors.New("$ in a go test command") })
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	g, err := parseGoTest(words)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	t.Logf("checked at the end, against go test -list: %s", strings.Join(g.pkgs, " "))
	*e.named = append(*e.named, func(t *testing.T, all map[string][]string) {
		for _, pkg := range g.pkgs {
			names, ok := all[goPackage(pkg)]
			if !ok {
				t.Errorf("%s: go test -list did not list %s", c, pkg)
				continue
			}
			switch {
			case g.hasBench:
				if err := goTestPatternMatches(g.bench, names, "Benchmark"); err != nil {
					t.Errorf("%s: -bench %q in %s: %v", c, g.bench, pkg, err)
				}
			case g.hasRun:
				if err := goTestPatternMatches(g.run, names, "Test", "Example", "Fuzz"); err != nil {
					t.Errorf("%s: -run %q in %s: %v", c, g.run, pkg, err)
				}
			}
		}
	})
}

// goPackage returns the import path of a ./dir package.
func goPackage(rel string) string {
	return "github.com/streamlearn/streamlearn/" + filepath.ToSlash(filepath.Clean(rel))
}

// listTests returns what `go test -list .` prints for each of pkgs (./dir
// packages, or ./dir/... for every package below), by import path: the
// names of the tests, benchmarks, fuzz tests and examples its _test.go
// files declare. It parses the files rather than running go test -list,
// which links a test binary of each package (9 s of TestDocs under -race,
// and a build of them all with fresh caches).
func listTests(repo string, pkgs []string) (map[string][]string, error) {
	names := map[string][]string{}
	var dirs []string
	for _, p := range pkgs {
		if rest, ok := strings.CutSuffix(p, "/..."); ok {
			err := filepath.WalkDir(filepath.Join(repo, rest), func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
						return filepath.SkipDir
					}
					rel, _ := filepath.Rel(repo, path)
					dirs = append(dirs, rel)
				}
				return err
			})
			if err != nil {
				return nil, err
			}
			continue
		}
		dirs = append(dirs, p)
	}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(repo, dir, "*_test.go"))
		if err != nil {
			return nil, err
		}
		var list []string
		for _, f := range files {
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			for _, d := range file.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && isTestName(fn.Name.Name) {
					list = append(list, fn.Name.Name)
				}
			}
		}
		if list != nil {
			slices.Sort(list)
			names[goPackage(dir)] = slices.Compact(list)
		}
	}
	return names, nil
}

// isTestName reports whether a function of a _test.go file by that name
// is one go test runs: Test, Benchmark, Fuzz or Example, then nothing or
// a character that is not a lower-case letter (TestMain runs the others).
func isTestName(name string) bool {
	if name == "TestMain" {
		return false
	}
	for _, prefix := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			return rest == "" || !unicode.IsLower([]rune(rest)[0])
		}
	}
	return false
}

// TestDocsExtract pins the extraction rule and the classification on a
// small page, with a command no rule runs.
func TestDocsExtract(t *testing.T) {
	page := "# Page\n" +
		"Replay with `go run ./cmd/streamlearn replay -c config.yaml\n" +
		"testdata/demo.jsonl` or `streamlearn check -c FILE`; `run --http ADDR` and `kill -9` are no commands,\n" +
		"`streamlearn run` names one.\n" +
		"\n" +
		"| what | command |\n" +
		"|---|---|\n" +
		"| rounds | `STREAMLEARN_X=1 go test ./internal/online -run XXX -bench 'A\\|B/c'` |\n" +
		"\n" +
		"```sh\n" +
		"# a comment\n" +
		"kcat -b 127.0.0.1:9092 -t events \\\n" +
		"  -C\n" +
		"$ go run ./cmd/streamlearn generate | go run ./cmd/streamlearn replay -   # exits 1: why\n" +
		"```\n" +
		"\n" +
		"```json\n" +
		"{\"events\": 5}\n" +
		"```\n" +
		"\n" +
		"```\n" +
		" source ──▶ learn\n" +
		"$ streamlearn version\n" +
		"streamlearn (devel)\n" +
		"```\n" +
		"\n" +
		"```yaml\n" +
		"source: {kind: kafka}\n" +
		"```\n" +
		"Run `bench/vw/compare.sh` and `source <(streamlearn completion bash)`.\n"
	type want struct {
		line    int
		text    string
		comment string
		kind    docKind
		output  []string
	}
	wants := []want{
		{2, "go run ./cmd/streamlearn replay -c config.yaml testdata/demo.jsonl", "", kindStreamlearn, nil},
		{3, "streamlearn check -c FILE", "", kindSynopsis, nil},
		{4, "streamlearn run", "", kindMention, nil},
		{8, "STREAMLEARN_X=1 go test ./internal/online -run XXX -bench 'A|B/c'", "", kindGoTest, nil},
		{12, "kcat -b 127.0.0.1:9092 -t events -C", "", kindUnknown, nil},
		{14, "go run ./cmd/streamlearn generate | go run ./cmd/streamlearn replay -", "exits 1: why", kindStreamlearn, []string{`{"events": 5}`}},
		{23, "streamlearn version", "", kindStreamlearn, []string{"streamlearn (devel)"}},
		{30, "bench/vw/compare.sh", "", kindAllowed, nil},
		{30, "source <(streamlearn completion bash)", "", kindSource, nil},
	}
	got := extractDocCommands("page.md", page)
	if len(got) != len(wants) {
		for _, c := range got {
			t.Logf("%d: %q", c.line, c.text)
		}
		t.Fatalf("%d commands, want %d", len(got), len(wants))
	}
	for i, w := range wants {
		c := got[i]
		if c.line != w.line || c.text != w.text || c.comment != w.comment || classify(c) != w.kind || !slices.Equal(c.output, w.output) {
			t.Errorf("command %d: line %d %q comment %q kind %d output %q\nwant line %d %q comment %q kind %d output %q",
				i, c.line, c.text, c.comment, classify(c), c.output, w.line, w.text, w.comment, w.kind, w.output)
		}
	}
	if wantExit(got[5]) != 1 || wantExit(got[0]) != 0 {
		t.Errorf("exit statuses %d, %d: want 1 from the comment, else 0", wantExit(got[5]), wantExit(got[0]))
	}
	words, err := shellWords(`curl -s -H "Authorization: Bearer $(cat token)" -d '{"v":"$x"}' $DATA/a\ b`,
		func(name string) (string, error) { return "<" + name + ">", nil })
	if w := []string{"curl", "-s", "-H", "Authorization: Bearer <cat token>", "-d", `{"v":"$x"}`, "<DATA>/a b"}; err != nil || !slices.Equal(words, w) {
		t.Errorf("shellWords: %q, %v; want %q", words, err, w)
	}
}

// TestDocsGoTestPattern: the check of a go test command's pattern fails
// when an alternative matches no top-level name.
func TestDocsGoTestPattern(t *testing.T) {
	names := []string{"TestSoak", "BenchmarkRound", "BenchmarkPredictLearn", "BenchmarkRunKafka", "BenchmarkBareKafka", "BenchmarkRunJetStream"}
	for _, c := range []struct {
		pattern string
		prefix  string
		ok      bool
	}{
		{"Round/", "Benchmark", true},
		{"PredictLearn/|Round/", "Benchmark", true},
		{"Round/.*/(ogd-hinge|ogd-logistic$|adagrad)", "Benchmark", true},
		{"RunKafka|BareKafka/group|RunJetStream", "Benchmark", true},
		{"RunKafka|BareKafka/group|RunJetStrem", "Benchmark", false},
		{"Rounds", "Benchmark", false},
		{"XXX", "Test", false},
		{"TestSoak$", "Test", true},
		{"Soak", "Benchmark", false},
	} {
		if err := goTestPatternMatches(c.pattern, names, c.prefix); (err == nil) != c.ok {
			t.Errorf("%s %q: %v, want ok %v", c.prefix, c.pattern, err, c.ok)
		}
	}
	if _, err := parseGoTest(strings.Fields("go test -benchtme 1s ./internal/online")); err == nil {
		t.Error("go test -benchtme: no error")
	}
	if g, err := parseGoTest(strings.Fields("go test -run=^$ -bench X -count 3 ./a ./b/")); err != nil || g.bench != "X" || !slices.Equal(g.pkgs, []string{"./a", "./b/"}) {
		t.Errorf("parseGoTest: %+v, %v", g, err)
	}
}
