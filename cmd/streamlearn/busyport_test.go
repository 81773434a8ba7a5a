package main

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestRunBusyPortNamesFlag: a run whose embedded NATS port or HTTP address
// is taken says which port and which flag and config key choose another.
func TestRunBusyPortNamesFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	code, _, errOut := run(t, "run", "--until-end", "--allow-empty", "--nats-port", strconv.Itoa(port), "--http", "off", "--store", t.TempDir())
	want := "embedded NATS server: port " + strconv.Itoa(port) + " is in use: choose another with --nats-port N (source.port in the config"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("nats port taken: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}

	addr := ln.Addr().String()
	code, _, errOut = run(t, "run", "--until-end", "--allow-empty", "--nats-port", "-1", "--http", addr, "--store", t.TempDir())
	want = "http: " + addr + " is in use: choose another address with --http ADDR (http.addr in the config"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("http address taken: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
}
