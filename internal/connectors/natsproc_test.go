package connectors

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/streamlearn/streamlearn/internal/testproc"
)

// natsServerEnv names a nats-server binary (e.g. Debian's
// /usr/sbin/nats-server, 2.9.10) that the NATS and JetStream tests then
// run against, one process per test, instead of the server library
// embedded in the test binary (.ci/run runs them so once):
//
//	STREAMLEARN_NATS_SERVER=/usr/sbin/nats-server go test -run 'NATS|JetStream' ./internal/connectors/
const natsServerEnv = "STREAMLEARN_NATS_SERVER"

// natsConf is the text of a nats-server configuration file, one line per
// element (authorization, TLS, accounts); nil for none. Both the embedded
// server (server.ProcessConfigFile) and a nats-server process (-c) read
// the same file, so a test configures either the same way. Listen
// address, port, JetStream and its store directory come from the helper.
type natsConf []string

// natsTestSrv is a server a test runs against, embedded or a process.
type natsTestSrv struct {
	url string
}

// ClientURL returns the plaintext URL of the client port,
// nats://127.0.0.1:<port> (TLS clients upgrade on it).
func (s *natsTestSrv) ClientURL() string { return s.url }

// natsTestServer runs a server with JetStream and conf on a free loopback
// port and a temporary store, stopped in t's cleanup: the embedded one,
// or with STREAMLEARN_NATS_SERVER set, that binary as a process.
func natsTestServer(t testing.TB, conf natsConf) *natsTestSrv {
	t.Helper()
	dir := t.TempDir()
	var confFile string
	if conf != nil {
		confFile = writeTestFile(t, dir, "server.conf", []byte(strings.Join(conf, "\n")+"\n"))
	}
	if bin := os.Getenv(natsServerEnv); bin != "" {
		return natsProcServer(t, bin, dir, confFile)
	}
	opts := &server.Options{}
	if confFile != "" {
		var err error
		if opts, err = server.ProcessConfigFile(confFile); err != nil {
			t.Fatalf("server config %s: %v\n%s", confFile, err, strings.Join(conf, "\n"))
		}
	}
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.JetStream, opts.StoreDir = true, filepath.Join(dir, "jetstream")
	srv, err := jsStartServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return &natsTestSrv{url: srv.ClientURL()}
}

// natsProcReady bounds the wait for a nats-server process to accept
// clients, and then for it to exit on SIGTERM.
const natsProcReady = 10 * time.Second

// natsProcServer starts bin with JetStream on loopback and a port of its
// choosing (-p -1), storing under dir, with confFile when not empty. The
// port comes from the ports file the server writes once it listens
// (--ports_file_dir: no race for a port picked beforehand); it is ready
// when it sends INFO there. Its log goes to dir/server.log. Cleanup stops
// it with SIGTERM (then SIGKILL) and waits for it to exit, before
// t.TempDir removes dir.
func natsProcServer(t testing.TB, bin, dir, confFile string) *natsTestSrv {
	t.Helper()
	args := []string{"-js", "-a", "127.0.0.1", "-p", "-1",
		"-sd", filepath.Join(dir, "jetstream"), "--ports_file_dir", dir}
	if confFile != "" {
		args = append(args, "-c", confFile)
	}
	cmd := testproc.Command(t, bin, args...)
	logFile := filepath.Join(dir, "server.log")
	log, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close() // the process has its own descriptor
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s=%s: %v", natsServerEnv, bin, err)
	}
	done := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
			return
		case <-time.After(natsProcReady):
			t.Errorf("nats-server (pid %d) ignored SIGTERM for %v", cmd.Process.Pid, natsProcReady)
		}
		_ = cmd.Process.Kill()
		<-done
	})
	fail := func(format string, a ...any) {
		t.Helper()
		out, _ := os.ReadFile(logFile)
		t.Fatalf("%s %s: %s\n%s", bin, strings.Join(args, " "), fmt.Sprintf(format, a...), out)
	}
	portsFile := filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(bin), cmd.Process.Pid))
	deadline := time.Now().Add(natsProcReady)
	for {
		addr, err := natsPortsFile(portsFile)
		if err == nil {
			var version string
			if version, err = natsSaysInfo(addr); err == nil {
				t.Logf("nats-server %s (pid %d) on %s", version, cmd.Process.Pid, addr)
				return &natsTestSrv{url: "nats://" + addr}
			}
		}
		select {
		case <-done:
			fail("exited: %v", werr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			fail("not accepting clients after %v: %v", natsProcReady, err)
		}
	}
}

// natsPortsFile reads the client address (host:port) from a ports file,
// {"nats":["nats://127.0.0.1:36495"],...}; an error until it is written.
func natsPortsFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var ports struct{ Nats []string }
	if err := json.Unmarshal(b, &ports); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(ports.Nats) == 0 {
		return "", fmt.Errorf("%s: no client port in %s", path, b)
	}
	u, err := url.Parse(ports.Nats[0])
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return u.Host, nil
}

// natsSaysInfo connects to addr, reads the server's greeting (INFO, sent
// before any authentication or TLS) and returns the version it gives.
func natsSaysInfo(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	info, ok := strings.CutPrefix(line, "INFO ")
	var v struct{ Version string }
	if !ok || json.Unmarshal([]byte(info), &v) != nil {
		return "", fmt.Errorf("%s greets with %q, not INFO {...}", addr, line)
	}
	return v.Version, nil
}
