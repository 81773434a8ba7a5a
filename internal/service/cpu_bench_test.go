package service_test

// The CPU `run` spends per event against a bare consumer of the same
// client library, the broker in a process of its own so that its CPU is
// not counted: kfake (internal/testbroker/kfake, built here) for Kafka,
// nats-server for JetStream.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/testbroker"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

// cpuEvents is how many events BenchmarkCPUPerEvent's arms read:
// STREAMLEARN_BENCH_EVENTS when set, else 200,000.
func cpuEvents(b *testing.B) int {
	if os.Getenv("STREAMLEARN_BENCH_EVENTS") != "" {
		return benchEventCount(b)
	}
	return 200_000
}

// BenchmarkCPUPerEvent: the process CPU (user + system, getrusage) per
// event of `run --until-end` — the source `run` opens, service.Run with
// the README's default learners (a Perceptron and plain AdaGrad) and the
// tracker, commits every service.DefaultCommitEvery records — against the
// bare consumer of the same client and settings that reads the same
// records, commits or acks as often and does nothing else
// (bareKafkaGroup, bareJetStream), and against learn: that bare consumer
// decoding and learning each record in its own goroutine (bareLearner),
// the least a consumer that learns can spend. The broker runs in another
// process, kfake for Kafka (one partition), nats-server for JetStream
// (file storage), so this process's CPU is the consumer's alone. Each
// iteration runs the three arms in turn (the first rotating) over
// cpuEvents() events of DESIGN.md's shape, preloaded once; the benchmark
// reports each arm's median cpu-ns/event and events/s and the medians of
// the iterations' run/bare and run/learn CPU ratios:
//
//	go test -run '^$' -bench CPUPerEvent -benchtime 5x ./internal/service/
//
// JetStream is skipped without a nats-server on PATH, Kafka without the
// go command (to build kfake).
func BenchmarkCPUPerEvent(b *testing.B) {
	n := cpuEvents(b)
	c := parseBenchConfig(b, defaultLearnersYAML)
	ctx := context.Background()
	b.Run("kafka", func(b *testing.B) {
		brokers := kfakeProcess(b, 1)
		benchKafkaPreload(b, brokers, n)
		cpuArms(b, n, func() {}, cpuArm{"run", func() {
			src, err := benchOpen(ctx, config.Source{Kind: "kafka", Conn: config.Conn{Brokers: brokers},
				Topic: benchTopic, Group: benchName("run")})
			if err != nil {
				b.Fatal(err)
			}
			benchRun(b, c, src, n)
		}}, cpuArm{"bare", func() {
			bareKafkaGroup(b, brokers, benchName("bare"), n, nil)
		}}, cpuArm{"learn", func() {
			bareKafkaGroup(b, brokers, benchName("learn"), n, bareLearner(b, c))
		}})
	})
	b.Run("jetstream", func(b *testing.B) {
		url := natsServerProcess(b)
		benchJetStreamPreload(b, url, n)
		var durable string
		cpuArms(b, n, func() { benchDeleteConsumer(b, url, durable) }, cpuArm{"run", func() {
			durable = benchName("run")
			src, err := benchOpen(ctx, config.Source{Kind: "jetstream", Conn: config.Conn{URL: url},
				Subject: benchSubject, Stream: benchStream, Durable: durable})
			if err != nil {
				b.Fatal(err)
			}
			benchRun(b, c, src, n)
		}}, cpuArm{"bare", func() {
			durable = benchName("bare")
			bareJetStream(b, url, durable, n, nil)
		}}, cpuArm{"learn", func() {
			durable = benchName("learn")
			bareJetStream(b, url, durable, n, bareLearner(b, c))
		}})
	})
}

// defaultLearnersYAML is the README's default learner set: a Perceptron
// and plain AdaGrad, both with a bias.
const defaultLearnersYAML = `
learners:
  - {name: perceptron, algorithm: perceptron, bias: true}
  - {name: adagrad, algorithm: adagrad, normalized: false, bias: true}
`

// bareLearner returns what the "learn" arm does with each record, in the
// consumer's goroutine: decode it and have a pipeline of c's learners
// predict, learn and track it — the work of learning alone, without
// the service around it.
func bareLearner(b *testing.B, c *config.Config) func([]byte) {
	p, err := pipeline.New(c)
	if err != nil {
		b.Fatal(err)
	}
	dec, err := event.NewDecoder(pipeline.EventConfig(c))
	if err != nil {
		b.Fatal(err)
	}
	var ev event.Event
	return func(v []byte) {
		if err := dec.Decode(v, &ev); err != nil {
			b.Fatal(err)
		}
		p.Process(&ev)
	}
}

// A cpuArm is one way of reading the stream, measured by cpuArms.
type cpuArm struct {
	name string
	read func()
}

// cpuArms runs every arm once per iteration, in turn (the order rotates
// each iteration), each measured from a collected heap and followed by
// after (off the clock, not measured), and reports each arm's median
// cpu-ns/event and events/s, and the median of the iterations' ratios
// of the first arm's CPU to each other's.
// Each arm runs under the profiler label arm=<name>, which the goroutines
// it starts (the client's readers, the service's workers) inherit, so a
// -cpuprofile of the benchmark splits by arm: go tool pprof -tagfocus
// arm=run (the runtime's own work, the garbage collector's background
// marking among it, carries no label).
func cpuArms(b *testing.B, n int, after func(), arms ...cpuArm) {
	cpu := make([][]float64, len(arms))
	rate := make([][]float64, len(arms))
	ratios := make([][]float64, len(arms))
	i := 0
	for b.Loop() {
		got := make([]float64, len(arms))
		for k := range arms {
			a := (i + k) % len(arms)
			runtime.GC()
			t0, c0 := time.Now(), benchCPU()
			pprof.Do(context.Background(), pprof.Labels("arm", arms[a].name), func(context.Context) { arms[a].read() })
			used, wall := benchCPU()-c0, time.Since(t0)
			b.StopTimer()
			after()
			b.StartTimer()
			got[a] = float64(used) / float64(n)
			cpu[a], rate[a] = append(cpu[a], got[a]), append(rate[a], float64(n)/wall.Seconds())
		}
		for a := 1; a < len(arms); a++ {
			ratios[a] = append(ratios[a], got[0]/got[a])
		}
		i++
	}
	for a, arm := range arms {
		b.Logf("cpu-ns/event %s: %.0f", arm.name, cpu[a])
		if a > 0 {
			b.Logf("%s/%s: %.2f", arms[0].name, arm.name, ratios[a])
			b.ReportMetric(median(ratios[a]), arms[0].name+"/"+arm.name)
		}
		b.ReportMetric(median(cpu[a]), "cpu-ns/event-"+arm.name)
		b.ReportMetric(median(rate[a]), "events/s-"+arm.name)
	}
}

// procReady bounds the wait for a broker process to accept clients.
const procReady = 30 * time.Second

// kfakeProcess builds internal/testbroker/kfake, starts it with benchTopic
// of partitions partitions, and returns its bootstrap addresses; the
// process ends with b. Without the go command, b is skipped.
func kfakeProcess(b *testing.B, partitions int) []string {
	b.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			b.Skip("no go command to build kfake")
		}
	}
	bin := filepath.Join(b.TempDir(), "kfake")
	if out, err := testproc.Command(b, goTool, "build", "-o", bin, "../testbroker/kfake").CombinedOutput(); err != nil {
		b.Fatalf("go build kfake: %v\n%s", err, out)
	}
	cmd := testproc.Command(b, bin, "-partitions", fmt.Sprint(partitions), "-topic", benchTopic)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stopProc(b, cmd) })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case l := <-line:
		if l == "" {
			b.Fatal("kfake exited without an address")
		}
		return strings.Split(l, ",")
	case <-time.After(procReady):
		b.Fatalf("kfake printed no address in %v", procReady)
	}
	return nil
}

// natsServerProcess starts nats-server (from PATH) with JetStream on a
// port of its choosing, a store in b's temporary directory and benchStream
// (file storage, benchSubject), and returns its URL; the process ends
// with b. Without nats-server, b is skipped.
func natsServerProcess(b *testing.B) string {
	b.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		b.Skip("no nats-server on PATH (Debian's is in /usr/sbin)")
	}
	dir := b.TempDir()
	cmd := testproc.Command(b, bin, "-js", "-a", "127.0.0.1", "-p", "-1",
		"-sd", filepath.Join(dir, "jetstream"), "--ports_file_dir", dir)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stopProc(b, cmd) })
	portsFile := filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(bin), cmd.Process.Pid))
	var addr string
	for deadline := time.Now().Add(procReady); addr == ""; time.Sleep(20 * time.Millisecond) {
		var ports struct{ Nats []string }
		if data, err := os.ReadFile(portsFile); err == nil && json.Unmarshal(data, &ports) == nil && len(ports.Nats) > 0 {
			addr = ports.Nats[0]
		} else if time.Now().After(deadline) {
			b.Fatalf("nats-server wrote no ports file %s in %v", portsFile, procReady)
		}
	}
	u, err := url.Parse(addr)
	if err != nil {
		b.Fatal(err)
	}
	js := testbroker.JetStream(b, "nats://"+u.Host)
	ctx, cancel := context.WithTimeout(context.Background(), procReady)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: benchStream, Subjects: []string{benchSubject},
		Storage: jetstream.FileStorage}); err != nil {
		b.Fatal(err)
	}
	return "nats://" + u.Host
}

// stopProc ends a broker process with SIGTERM and waits for it (its group
// is killed by testproc after).
func stopProc(b *testing.B, cmd *testproc.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		b.Logf("%s (pid %d) ignored SIGTERM for 10s", cmd.Path, cmd.Process.Pid)
	}
}
