package main

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestStartErrorPortInUse: a port another process listens on stops kfake
// with the flag that picks another, not the bare bind error.
func TestStartErrorPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c, err := kfake.NewCluster(kfake.Ports(port))
	if err == nil {
		c.Close()
		t.Fatalf("a cluster started on port %d, which a listener holds", port)
	}
	msg := startError(err)
	for _, want := range []string{strconv.Itoa(port), "address already in use", "choose another port with -ports N (0: a free one)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("no %q in %q", want, msg)
		}
	}
}
