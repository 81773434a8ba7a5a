package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// readmeCommands returns the commands of README.md's code blocks, in
// order: each line that runs streamlearn (`go run ./cmd/streamlearn ...`,
// with or without a `$ ` prompt) or curl.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in := false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		line = strings.TrimPrefix(line, "$ ")
		if in && (strings.HasPrefix(line, "go run ./cmd/streamlearn ") || strings.HasPrefix(line, "curl ") || strings.HasPrefix(line, "go test ")) {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// freePort returns a TCP port free on 127.0.0.1 now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestReadmeTour runs every command of README.md's code blocks, in order,
// as a new user would type them: the streamlearn commands in this process
// from the repository's root, the long-running `run` of the tour in the
// background until the tour is over, and the curl commands against it.
// Two changes keep it from colliding with other tests: the embedded
// server and the HTTP API get free ports instead of 4222 and 8080, and
// the plot goes to a temporary directory. The test suite's own command
// (go test) is not run again.
func TestReadmeTour(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) < 8 {
		t.Fatalf("README has %d commands, want the two commands and the tour's: %q", len(cmds), cmds)
	}
	t.Chdir("../..")
	natsPort, httpPort := freePort(t), freePort(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", httpPort)
	tmp := t.TempDir()
	var serviceDone chan int
	var serviceErr syncBuffer
	ctx, stop := context.WithCancel(t.Context())
	defer func() {
		stop()
		if serviceDone != nil {
			if code := <-serviceDone; code != 0 {
				t.Errorf("the tour's run: exit %d:\n%s", code, serviceErr.String())
			}
		}
	}()
	ran := 0
	for _, line := range cmds {
		switch {
		case strings.HasPrefix(line, "go test "):
			continue
		case strings.HasPrefix(line, "curl "):
			body := curl(t, line, httpAddr)
			if strings.Contains(line, "/metrics") && !strings.Contains(body, "streamlearn_mistakes_total{") ||
				strings.Contains(line, "/v1/report") && !strings.Contains(body, `"events":5000`) ||
				strings.Contains(line, "/v1/predict") && !strings.Contains(body, `"answer"`) {
				t.Errorf("%s: %.300s", line, body)
			}
			ran++
			continue
		}
		args := strings.Fields(strings.TrimPrefix(line, "go run ./cmd/streamlearn "))
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "/tmp/", tmp+"/")
		}
		switch {
		case args[0] == "run" && !slices.Contains(args, "-c"):
			args = append(args, "--nats-port", fmt.Sprint(natsPort), "--store", filepath.Join(tmp, "js"))
			if !slices.Contains(args, "--until-end") {
				// The tour's service: in the background until the end.
				args = append(args, "--http", httpAddr)
				serviceDone = make(chan int, 1)
				go func() { serviceDone <- Main(ctx, args, io.Discard, &serviceErr) }()
				waitHTTP(t, httpAddr, &serviceErr)
				ran++
				continue
			}
			args = append(args, "--http", "off")
		case args[0] == "publish":
			args = append(args[:1], append([]string{"--url", fmt.Sprintf("nats://127.0.0.1:%d", natsPort)}, args[1:]...)...)
		}
		var out, errOut bytes.Buffer
		if code := Main(t.Context(), args, &out, &errOut); code != 0 {
			t.Fatalf("%s: exit %d:\n%s%s", line, code, out.String(), errOut.String())
		}
		if args[0] == "publish" {
			waitReport(t, httpAddr, 5000)
		}
		ran++
	}
	if ran < 8 {
		t.Errorf("ran %d commands of README", ran)
	}
	if _, err := os.Stat(filepath.Join(tmp, "demo.svg")); err != nil {
		t.Errorf("the tour's plot: %v", err)
	}
}

// curl does what the README's curl line does (GET, or POST with -d),
// against addr instead of localhost:8080, and returns the body.
func curl(t *testing.T, line, addr string) string {
	t.Helper()
	cmd, _, _ := strings.Cut(line, " | ") // the README greps the metrics
	fields := strings.Fields(cmd)
	var url, data string
	for i := 1; i < len(fields); i++ {
		switch {
		case fields[i] == "-d":
			data = strings.Trim(strings.Join(fields[i+1:], " "), "'")
			i = len(fields)
		case strings.HasPrefix(fields[i], "localhost:8080"):
			url = "http://" + addr + strings.TrimPrefix(fields[i], "localhost:8080")
		}
	}
	if url == "" {
		t.Fatalf("%s: no URL on localhost:8080", line)
	}
	var resp *http.Response
	var err error
	if data != "" {
		resp, err = http.Post(url, "application/json", strings.NewReader(data))
	} else {
		resp, err = http.Get(url)
	}
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: %s: %s", line, resp.Status, b)
	}
	return string(b)
}

func waitHTTP(t *testing.T, addr string, stderr *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tour's run serves no HTTP on %s:\n%s", addr, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitReport waits until the service at addr has learned n events.
func waitReport(t *testing.T, addr string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	want := fmt.Sprintf(`"events":%d`, n)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + addr + "/v1/report"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), want) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the tour's run has not learned %d events after 30s", n)
}
