// Command kfake runs an in-memory Kafka cluster (franz-go's kfake, which
// speaks the real wire protocol) as a process of its own, for end-to-end
// tests with independent clients such as kcat:
//
//	kfake [-ports 0] [-partitions 1] [-topic events] [-session-min 100ms] [-data-dir DIR [-sync]]
//
// It listens on 127.0.0.1, prints the bootstrap address (host:port of every
// broker, comma-separated) as one line on standard output once the brokers
// accept connections, and runs until SIGINT or SIGTERM. Without -data-dir
// the cluster's data dies with the process; with it, kfake writes its log,
// topics and group commits there as it goes (write(2) per batch: they
// survive a SIGKILL of the process, and with -sync a crash of the machine)
// and a kfake started again on the same directory (and -ports) is the same
// cluster, seeded topics ignored.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	ports := flag.String("ports", "0", "comma-separated loopback `ports`, one broker each (0: a free port)")
	partitions := flag.Int("partitions", 1, "partitions of each seeded topic")
	var topics []string
	flag.Func("topic", "seed this `topic` (repeatable, or comma-separated)", func(s string) error {
		for t := range strings.SplitSeq(s, ",") {
			if t = strings.TrimSpace(t); t != "" {
				topics = append(topics, t)
			}
		}
		return nil
	})
	dataDir := flag.String("data-dir", "", "keep the cluster's state in this `directory`, reloaded at start")
	sync := flag.Bool("sync", false, "with -data-dir, fsync every produced batch")
	sessionMin := flag.Duration("session-min", 100*time.Millisecond, "smallest group session timeout the brokers accept (Kafka's default is 6s)")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "kfake runs an in-memory Kafka cluster on 127.0.0.1, prints its address and serves until Ctrl-C.\n\n"+
			"Usage: kfake [-ports 0] [-partitions 1] [-topic T]... [-session-min 100ms] [-data-dir DIR [-sync]]\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fail(2, "unexpected arguments %q", flag.Args())
	}
	if *partitions < 1 {
		fail(2, "-partitions %d: want at least 1", *partitions)
	}

	var portList []int
	for p := range strings.SplitSeq(*ports, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 65535 {
			fail(2, "-ports: %q is not a port", p)
		}
		portList = append(portList, n)
	}
	opts := []kfake.Opt{
		kfake.Ports(portList...),
		kfake.GroupMinSessionTimeout(*sessionMin),
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), topics...))
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
		if *sync {
			opts = append(opts, kfake.SyncWrites())
		}
	} else if *sync {
		fail(2, "-sync needs -data-dir")
	}

	// Subscribe before starting, so that a signal sent as soon as the
	// address is printed is not lost.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)

	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fail(1, "%s", startError(err))
	}
	// The listeners are bound once NewCluster returns: clients may connect.
	fmt.Println(strings.Join(c.ListenAddrs(), ","))
	<-sig
	c.Close()
}

// startError returns the message of a cluster that did not start: for a
// port another process holds, the flag that picks another, and where the
// clients then connect.
func startError(err error) string {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Sprintf("%v: choose another port with -ports N (0: a free one), and give the clients the address kfake prints", err)
	}
	return err.Error()
}

func fail(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "kfake: "+format+"\n", a...)
	os.Exit(code)
}
