package main

// End-to-end tests with independent clients and brokers, each a process of
// its own: a kfake Kafka broker (internal/testbroker/kfake) fed by kcat, and
// Debian's nats-server. streamlearn itself runs as a built binary, so flags,
// exit codes, stdout and signal handling are exercised as a user sees them.
//
// kcat and nats-server come from Debian (apt-get install kcat nats-server);
// without them these tests skip, except under CI=true, where they fail.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/streamlearn/streamlearn/internal/testbroker"
	"github.com/streamlearn/streamlearn/internal/testproc"
	"go.yaml.in/yaml/v3"
)

const (
	e2eDemo = "../../testdata/demo.jsonl"
	// e2eTimeout bounds each end-to-end test once the binaries are built:
	// a guard against a hang that names what was running, not a speed
	// claim. Quiet, the longest test takes a fifth of its deadline under
	// -race; a machine loaded several times over (CPU hogs, the suite
	// twice at once) must not reach it.
	e2eTimeout = 2 * time.Minute
)

// e2eBins holds the binaries built once per test process, shared by every
// end-to-end test and removed with the folder of TestMain.
var e2eBins struct {
	once                 sync.Once
	dir                  string
	streamlearn, kfake   string
	err                  error
	buildTime, buildArgs string
}

// TestMain runs the tests with TMPDIR a folder of this test binary's,
// removed when it ends however it ends (testproc.Main): the binaries of
// e2eBuild and every t.TempDir are in it.
func TestMain(m *testing.M) { testproc.Main(m) }

// parallelTests: the tests marked "see parallelTests" run two at a time
// (go test's -parallel, GOMAXPROCS by default) after the others. Each has
// its own brokers, servers and folders and spends most of its time
// waiting for a checkpoint, a session or a scrape, so a pair takes little
// more than the longer one. Of the Kafka tests that SIGKILL members and
// wait for their sessions to expire, only TestE2EKafkaUntilEndAfterKills
// is one: under -race two such kill loops at once starve each other's
// heartbeats on two cores.

// e2eBuild builds streamlearn and the kfake broker with `go build` into a
// temporary directory, once. It uses the test binary's -race setting, so
// the packages come from the build cache the test binary's build filled
// and only the link is new.
func e2eBuild(t testing.TB) (streamlearn, kfake string) {
	t.Helper()
	b := &e2eBins
	b.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		if b.dir, b.err = os.MkdirTemp("", "streamlearn-e2e-"); b.err != nil {
			return
		}
		args := []string{"build", "-o", b.dir + string(filepath.Separator)}
		if raceEnabled() {
			args = append(args, "-race")
		}
		args = append(args, ".", "../../internal/testbroker/kfake")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		out, err := testproc.CommandContext(t, ctx, goTool, args...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		b.buildTime, b.buildArgs = time.Since(start).Round(time.Millisecond).String(), strings.Join(args[3:], " ")
		b.streamlearn, b.kfake = filepath.Join(b.dir, "streamlearn"), filepath.Join(b.dir, "kfake")
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	t.Logf("binaries built in %s (go build %s)", b.buildTime, b.buildArgs)
	return b.streamlearn, b.kfake
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// e2eStart returns the context of an end-to-end test, done after d or when
// the test ends, and a temporary directory for its files.
func e2eStart(t *testing.T, d time.Duration) (context.Context, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx, t.TempDir()
}

// e2eDemoFile returns the absolute path of the demo stream (e2eDemo).
func e2eDemoFile(t *testing.T) string {
	t.Helper()
	demo, err := filepath.Abs(e2eDemo)
	if err != nil {
		t.Fatal(err)
	}
	return demo
}

// lookTool returns the path of command name, looking in PATH and then in
// dirs; "" when it is in neither.
func lookTool(name string, dirs ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// e2eTool returns the path of an external command, looking in PATH and then
// in dirs (Debian installs nats-server in /usr/sbin, which is not in every
// user's PATH). Missing, the test skips, or fails when CI is "true": CI
// installs the tools (.ci/run) and must run these tests. -short skips.
func e2eTool(t *testing.T, name, pkg string, dirs ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test (builds binaries, runs brokers as processes): skipped in -short mode")
	}
	if p := lookTool(name, dirs...); p != "" {
		return p
	}
	msg := fmt.Sprintf("%s is not installed (Debian: apt-get install %s); this end-to-end test needs it", name, pkg)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + ", and CI=true: .ci/run must install it")
	}
	t.Skip(msg)
	return ""
}

// proc is a child process that t's cleanup kills.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout bytes.Buffer // when not piped; read after done
	stderr syncBuffer
	done   chan struct{}
	err    error // Wait's; set before done closes
}

// syncBuffer is a bytes.Buffer safe for a writer and concurrent readers.
type syncBuffer = testproc.Buffer

// start runs path with args in dir. With pipeStdout, the caller reads the
// returned reader; otherwise stdout is collected in p.stdout. The process
// is killed (SIGKILL) when ctx ends and, at the latest, in t's cleanup.
func start(t *testing.T, ctx context.Context, dir string, pipeStdout bool, path string, args ...string) (*proc, io.Reader) {
	t.Helper()
	p := &proc{name: filepath.Base(path), done: make(chan struct{})}
	c := testproc.CommandContext(t, ctx, path, args...)
	p.cmd = c.Cmd
	p.cmd.Dir = dir
	// A -race binary sleeps 1s at exit (atexit_sleep_ms) unless told not to.
	p.cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	p.cmd.Stderr = &p.stderr
	p.cmd.WaitDelay = 2 * time.Second
	var out io.Reader
	if pipeStdout {
		r, err := p.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		out = r
	} else {
		p.cmd.Stdout = &p.stdout
	}
	if err := c.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		// SIGTERM, as a service manager would, then SIGKILL.
		select {
		case <-p.done:
			return
		default:
		}
		if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
			select {
			case <-p.done:
				return
			case <-time.After(5 * time.Second):
				t.Errorf("%s (pid %d) ignored SIGTERM for 5s", p.name, p.cmd.Process.Pid)
			}
		}
		p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
		}
	})
	return p, out
}

// waitExit waits for p to exit, failing t at ctx's end.
func (p *proc) waitExit(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-p.done:
	case <-ctx.Done():
		t.Fatalf("%s %s: still running at the test's deadline\nstderr:\n%s", p.name, strings.Join(p.cmd.Args[1:], " "), p.stderr.String())
	}
}

// wait waits for p to exit and fails t unless it exited with status 0.
func (p *proc) wait(t *testing.T, ctx context.Context) {
	t.Helper()
	p.waitExit(t, ctx)
	if p.err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s", p.name, strings.Join(p.cmd.Args[1:], " "), p.err, p.stderr.String())
	}
}

// runProc runs path with args to completion, bounded by ctx, and returns
// its standard output.
func runProc(t *testing.T, ctx context.Context, dir, path string, args ...string) []byte {
	t.Helper()
	t0 := time.Now()
	p, _ := start(t, ctx, dir, false, path, args...)
	p.wait(t, ctx)
	t.Logf("%s %s: %v", filepath.Base(path), args[0], time.Since(t0).Round(time.Millisecond))
	return p.stdout.Bytes()
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// e2eConfig writes a config with the input, features and learners of the
// example config.yaml (not its file source, file sinks, HTTP address or
// checkpoint directory) followed by extra, and returns its path.
func e2eConfig(t *testing.T, dir, name, extra string) string {
	t.Helper()
	data, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	var kept []*yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "input", "features", "learners":
			kept = append(kept, root.Content[i], root.Content[i+1])
		}
	}
	if len(kept) != 6 {
		t.Fatalf("config.yaml: want input, features and learners, got %d keys of them", len(kept)/2)
	}
	root.Content = kept
	base, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, append(base, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// normReport parses one report object, checks its source and partition
// when want is not empty, and returns it re-encoded (keys sorted, numbers
// as they were written) without the keys a live run and a replay may
// legitimately differ in: seconds, source, partition.
func normReport(t *testing.T, what string, data []byte, wantSource string, events int) []byte {
	t.Helper()
	return normReportLabeled(t, what, data, wantSource, events, events)
}

// normReportLabeled is normReport for a stream of events of which labeled
// are labeled and valid (the others bad records, counted as events).
func normReportLabeled(t *testing.T, what string, data []byte, wantSource string, events, labeled int) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: not a JSON report: %v\n%s", what, err, data)
	}
	if dec.More() {
		t.Fatalf("%s: more than one report (one model per partition expected, and one partition):\n%s", what, data)
	}
	if wantSource != "" {
		if m["source"] != wantSource || m["partition"] != json.Number("0") {
			t.Errorf("%s: source %v partition %v, want %s partition 0", what, m["source"], m["partition"], wantSource)
		}
	}
	if m["events"] != json.Number(strconv.Itoa(events)) || m["labeled"] != json.Number(strconv.Itoa(labeled)) {
		t.Errorf("%s: events %v labeled %v, want %d and %d", what, m["events"], m["labeled"], events, labeled)
	}
	if l, _ := m["learners"].([]any); len(l) != 8 {
		t.Errorf("%s: %d learners, want config.yaml's 8", what, len(l))
	}
	// The final report of a run comes after the last record: nothing is
	// left behind it. (A report published mid-run may see records a core
	// NATS client has buffered but not yet counted.)
	if lag, ok := m["consumer_lag"]; ok && what == "run" && lag != json.Number("0") {
		t.Errorf("%s: consumer_lag %v at the end of the stream, want 0", what, lag)
	}
	delete(m, "seconds")
	delete(m, "source")
	delete(m, "partition")
	delete(m, "consumer_lag") // the live service's; a replay has none
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameReport fails t unless the normalized reports are equal.
func sameReport(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the file replay's report:\n got: %s\nwant: %s", what, got, want)
	}
}

// sameFile fails t unless the files at a and b are equal.
func sameFile(t *testing.T, what, a, b string) {
	t.Helper()
	da, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(da, db) {
		la, lb := bytes.Count(da, []byte("\n")), bytes.Count(db, []byte("\n"))
		t.Errorf("%s: %s (%d lines) differs from %s (%d lines)", what, a, la, b, lb)
	}
}

// TestE2EKafkaKcat: a kfake broker in its own process, kcat (librdkafka)
// producing the demo file into it, `streamlearn run --until-end` consuming
// it: the report equals the file replay's, state digests included; then
// `streamlearn record` copies the topic back into the same file.
func TestE2EKafkaKcat(t *testing.T) {
	kcat := e2eTool(t, "kcat", "kcat")
	sl, kfake := e2eBuild(t)
	ctx, dir := e2eStart(t, e2eTimeout)
	demo := e2eDemoFile(t)

	bootstrap := startKfake(t, ctx, dir, kfake, 1)

	// -l: every line of the file is a message. Idempotence keeps them in
	// order across retries; the topic has one partition, so one model.
	runProc(t, ctx, dir, kcat, "-P", "-b", bootstrap, "-t", "events", "-l",
		"-X", "enable.idempotence=true", demo)

	cfg := e2eConfig(t, dir, "kafka.yaml", fmt.Sprintf(
		"source: {kind: kafka, brokers: [%q], topic: events, group: e2e}\n", bootstrap))
	want := normReport(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", cfg, "--report", "json", demo), "", 5000)

	live := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json")
	sameReport(t, "run --until-end on kafka", normReport(t, "run", live, "kafka:events", 5000), want)

	rec := filepath.Join(dir, "recorded.jsonl")
	runProc(t, ctx, dir, sl, "record", "-c", cfg, "-o", rec)
	sameFile(t, "record of the topic", rec, demo)

	// The group committed everything: a second run has nothing to learn,
	// and without checkpoints no model to report.
	emptyRun(t, ctx, dir, sl, "second run of group e2e", "run", "-c", cfg, "--until-end", "--report", "json")
}

// emptyRun runs path with args, a run that finds nothing to learn and no
// model to restore: an empty report is never a silent success, so it must
// exit with status 1 saying "no model to report" and print nothing; with
// --allow-empty added, exit 0 and print nothing.
func emptyRun(t *testing.T, ctx context.Context, dir, path, what string, args ...string) {
	t.Helper()
	p, _ := start(t, ctx, dir, false, path, args...)
	p.waitExit(t, ctx)
	if p.err == nil || p.stdout.Len() != 0 || !strings.Contains(p.stderr.String(), "no model to report") {
		t.Errorf("%s: want exit status 1, no report and \"no model to report\", got %v, stdout %q\nstderr:\n%s",
			what, p.err, p.stdout.String(), p.stderr.String())
	}
	if out := runProc(t, ctx, dir, path, append(args, "--allow-empty")...); len(out) != 0 {
		t.Errorf("%s with --allow-empty: want no report (nothing left), got\n%s", what, out)
	}
}

// startKfake runs the kfake broker program with one topic "events" of the
// given number of partitions and returns its bootstrap address.
func startKfake(t *testing.T, ctx context.Context, dir, bin string, partitions int) string {
	t.Helper()
	_, bootstrap := startKfakeProc(t, ctx, dir, bin, partitions)
	return bootstrap
}

// startKfakeProc is startKfake, also returning the broker's process.
func startKfakeProc(t *testing.T, ctx context.Context, dir, bin string, partitions int, args ...string) (*proc, string) {
	t.Helper()
	broker, out := start(t, ctx, dir, true, bin, append([]string{"-topic", "events", "-partitions", strconv.Itoa(partitions)}, args...)...)
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(line)
		io.Copy(io.Discard, out)
	}()
	var bootstrap string
	select {
	case bootstrap = <-addr:
	case <-broker.done:
		t.Fatalf("kfake exited: %v\n%s", broker.err, broker.stderr.String())
	case <-ctx.Done():
		t.Fatal("kfake printed no address")
	}
	if _, _, err := net.SplitHostPort(bootstrap); err != nil {
		t.Fatalf("kfake printed %q, want host:port: %v\n%s", bootstrap, err, broker.stderr.String())
	}
	t.Logf("kfake broker at %s (pid %d)", bootstrap, broker.cmd.Process.Pid)
	return broker, bootstrap
}

// natsServer starts Debian's nats-server with JetStream and monitoring on
// free loopback ports, and waits until it accepts clients. It returns the
// client URL and the monitoring base URL.
func natsServer(t *testing.T, ctx context.Context, bin, dir string) (clientURL, monURL string) {
	t.Helper()
	_, port, mport := natsServerFree(t, ctx, bin, dir)
	return fmt.Sprintf("nats://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", mport)
}

// natsServerFree is natsServerAt on free ports, which it returns. A port
// is free when picked and can be taken before the server binds it (other
// tests run beside this one): then it tries other ports, three times in
// all.
func natsServerFree(t *testing.T, ctx context.Context, bin, dir string) (srv *proc, port, mport int) {
	t.Helper()
	for try := 1; ; try++ {
		ports := freePorts(t, 2)
		srv, err := startNATSServerAt(t, ctx, bin, dir, ports[0], ports[1])
		if err == nil {
			return srv, ports[0], ports[1]
		}
		if try == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("nats-server on ports %v, taken meanwhile: %v; again on others", ports, err)
	}
}

// natsServerAt is natsServer on the given ports, with its JetStream store
// in dir/jetstream: started again with the same arguments, it is the same
// server after a restart. It returns the server's process.
func natsServerAt(t *testing.T, ctx context.Context, bin, dir string, port, mport int) *proc {
	t.Helper()
	srv, err := startNATSServerAt(t, ctx, bin, dir, port, mport)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// startNATSServerAt starts the server of natsServerAt and waits until it
// accepts clients; the error says why it did not (with its stderr).
func startNATSServerAt(t *testing.T, ctx context.Context, bin, dir string, port, mport int) (*proc, error) {
	t.Helper()
	store := filepath.Join(dir, "jetstream")
	srv, _ := start(t, ctx, dir, false, bin, "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port),
		"-m", strconv.Itoa(mport), "-sd", store)
	clientURL := fmt.Sprintf("nats://127.0.0.1:%d", port)
	for {
		nc, err := nats.Connect(clientURL, nats.Timeout(time.Second))
		if err == nil {
			nc.Close()
			return srv, nil
		}
		select {
		case <-srv.done:
			return nil, fmt.Errorf("nats-server exited: %v\n%s", srv.err, srv.stderr.String())
		case <-ctx.Done():
			return nil, fmt.Errorf("nats-server not accepting clients at %s: %v\n%s", clientURL, err, srv.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// jsStream creates stream name on subject at the NATS server url and
// returns it with its JetStream context; the connection closes with the
// test.
func jsStream(t *testing.T, ctx context.Context, url, name, subject string) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	js := testbroker.JetStream(t, url)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	return js, stream
}

// natsSubscribed waits until some client of the server at monURL has a
// subscription on subject (core NATS keeps nothing for a subscriber that
// is not there yet).
func natsSubscribed(t *testing.T, ctx context.Context, monURL, subject string) {
	t.Helper()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", monURL+"/connz?subs=1", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var connz struct {
				Connections []struct {
					Subs []string `json:"subscriptions_list"`
				} `json:"connections"`
			}
			err = json.NewDecoder(resp.Body).Decode(&connz)
			resp.Body.Close()
			for _, c := range connz.Connections {
				if slices.Contains(c.Subs, subject) {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no subscription on %q at %s (last error %v)", subject, monURL, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestE2ENATSServer runs streamlearn against Debian's nats-server (2.9 on
// Debian 12), an older server than the one embedded: JetStream through a
// stream and a durable to the end; a restart of a durable that has
// deliveries nobody acknowledged (2.9 has no consumer reset, so the
// source recreates the durable at its ack floor); and a core NATS round
// trip. Each live report equals the file replay's.
func TestE2ENATSServer(t *testing.T) {
	bin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	sl, _ := e2eBuild(t)
	ctx, dir := e2eStart(t, e2eTimeout)
	demo := e2eDemoFile(t)
	if out, err := testproc.CommandContext(t, ctx, bin, "--version").CombinedOutput(); err == nil {
		t.Logf("%s", bytes.TrimSpace(out))
	}
	url, mon := natsServer(t, ctx, bin, dir)

	replayCfg := e2eConfig(t, dir, "replay.yaml", "")
	want := normReport(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", replayCfg, "--report", "json", demo), "", 5000)

	t.Run("jetstream", func(t *testing.T) {
		_, stream := jsStream(t, ctx, url, "EVENTS", "events")
		runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", demo)
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 5000 {
			t.Fatalf("stream holds %d messages after publish, want 5000", info.State.Msgs)
		}

		cfg := e2eConfig(t, dir, "jetstream.yaml", fmt.Sprintf(
			"source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: e2e}\n", url))
		live := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json")
		sameReport(t, "run --until-end on jetstream", normReport(t, "run", live, "jetstream:EVENTS/e2e", 5000), want)

		// Everything learned was acknowledged, and nothing is in flight.
		cons, err := stream.Consumer(ctx, "e2e")
		if err != nil {
			t.Fatal(err)
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ci.AckFloor.Stream != 5000 || ci.Delivered.Stream != 5000 || ci.NumAckPending != 0 || ci.NumPending != 0 {
			t.Errorf("durable e2e: ack floor %d delivered %d ack pending %d pending %d; want 5000 5000 0 0",
				ci.AckFloor.Stream, ci.Delivered.Stream, ci.NumAckPending, ci.NumPending)
		}
		// Restarting the durable finds nothing left: no model (there are no
		// checkpoints), which is an error unless asked for.
		emptyRun(t, ctx, dir, sl, "second run of durable e2e", "run", "-c", cfg, "--until-end", "--report", "json")

		rec := filepath.Join(dir, "recorded.jsonl")
		runProc(t, ctx, dir, sl, "record", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", "-o", rec)
		sameFile(t, "record of the stream", rec, demo)
	})

	// A durable left with messages delivered but not acknowledged (a
	// process that pulled ahead and died) must deliver them again, first
	// and in order, on the next run.
	t.Run("jetstream-restart", func(t *testing.T) {
		_, stream := jsStream(t, ctx, url, "RESTART", "restart")
		data, err := os.ReadFile(demo)
		if err != nil {
			t.Fatal(err)
		}
		const split = 2500
		lines := bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
		if len(lines) != 5000 {
			t.Fatalf("%s: %d lines, want 5000", demo, len(lines))
		}
		head, tail := filepath.Join(dir, "head.jsonl"), filepath.Join(dir, "tail.jsonl")
		if err := os.WriteFile(head, bytes.Join(lines[:split], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tail, bytes.Join(lines[split:], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		replay := func(file string, events int) []byte {
			return normReport(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", replayCfg, "--report", "json", file), "", events)
		}
		cfg := e2eConfig(t, dir, "restart.yaml", fmt.Sprintf(
			"source: {kind: jetstream, url: %q, subject: restart, stream: RESTART, durable: r}\n", url))
		pub := func(file string) {
			runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", url, "--stream", "RESTART", "--subject", "restart", file)
		}
		runUntilEnd := func() []byte {
			return runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json")
		}

		pub(head)
		sameReport(t, "first run", normReport(t, "first run", runUntilEnd(), "jetstream:RESTART/r", split), replay(head, split))
		pub(tail)
		// Pull 100 messages on the durable and never acknowledge them.
		cons, err := stream.Consumer(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			if md, err := m.Metadata(); err != nil || md.Sequence.Stream != uint64(split+1+n) {
				t.Fatalf("pulled message %d: %+v, %v", n, md, err)
			}
			n++
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != 100 || ci.AckFloor.Stream != split || ci.Delivered.Stream != split+100 {
			t.Fatalf("pulled %d; ack floor %d delivered %d, want 100, %d, %d", n, ci.AckFloor.Stream, ci.Delivered.Stream, split, split+100)
		}
		sameReport(t, "run after unacknowledged deliveries", normReport(t, "second run", runUntilEnd(), "jetstream:RESTART/r", len(lines)-split), replay(tail, len(lines)-split))
		if ci, err = cons.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if ci.AckFloor.Stream != 5000 || ci.NumAckPending != 0 || ci.NumPending != 0 {
			t.Errorf("durable r: ack floor %d, ack pending %d, pending %d; want 5000, 0, 0", ci.AckFloor.Stream, ci.NumAckPending, ci.NumPending)
		}
		emptyRun(t, ctx, dir, sl, "third run of durable r", "run", "-c", cfg, "--until-end", "--report", "json")
	})

	// Core NATS keeps nothing and has no end: the service subscribes,
	// the demo is published, the service's report sink (a subject) says
	// when all 5000 events were learned, and SIGTERM drains it.
	t.Run("core", func(t *testing.T) {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		reports, err := nc.SubscribeSync("core-reports")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		cfg := e2eConfig(t, dir, "core.yaml", fmt.Sprintf(
			"source: {kind: nats, url: %q, subject: core}\nsinks:\n  reports: {kind: nats, subject: core-reports, every: 1000}\n", url))
		svc, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--report", "json")
		natsSubscribed(t, ctx, mon, "core")
		runProc(t, ctx, dir, sl, "publish", "--kind", "nats", "--url", url, "--subject", "core", demo)

		var last []byte
		for {
			m, err := reports.NextMsgWithContext(ctx)
			if err != nil {
				t.Fatalf("waiting for the report of event 5000 (last: %s): %v\nstreamlearn run stderr:\n%s", last, err, svc.stderr.String())
			}
			last = m.Data
			var r struct{ Events int }
			if err := json.Unmarshal(m.Data, &r); err != nil {
				t.Fatalf("report on core-reports: %v: %s", err, m.Data)
			}
			if r.Events >= 5000 {
				break
			}
		}
		sameReport(t, "report published to core-reports", normReport(t, "published report", last, "nats:core", 5000), want)

		if err := svc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		svc.wait(t, ctx)
		sameReport(t, "run on core nats, stopped by SIGTERM", normReport(t, "run", svc.stdout.Bytes(), "nats:core", 5000), want)
	})
}
