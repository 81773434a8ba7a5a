package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2EOneOwner runs two processes on one JetStream durable and one
// checkpoint directory, the mistake that used to split the stream between
// two models silently: the second stops within its checkpoint.own_wait,
// naming the first by its pid, before it opens the durable (opening
// resets it) or fetches anything. Once the first is
// killed (SIGKILL: the kernel gives its ownership back), a run learns the
// whole stream, equal to a replay.
func TestE2EOneOwner(t *testing.T) {
	sl, _ := e2eBuild(t)
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	ctx, dir := e2eStart(t, e2eTimeout)
	demo := e2eDemoFile(t)
	url, _ := natsServer(t, ctx, natsBin, dir)
	jsStream(t, ctx, url, "EVENTS", "events")
	runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", demo)
	want := normReport(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", e2eConfig(t, dir, "replay.yaml", ""), "--report", "json", demo), "", 5000)

	ckpt := filepath.Join(dir, "state")
	cfg := e2eConfig(t, dir, "owner.yaml", fmt.Sprintf(
		"source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: owner}\ncheckpoint: {dir: %q, every: 1000, own_wait: 1s}\n", url, ckpt))
	first, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--http", "off")
	holder := "pid " + strconv.Itoa(first.cmd.Process.Pid) + " on "
	for {
		if b, _ := os.ReadFile(filepath.Join(ckpt, ".partition-0.owner")); strings.HasPrefix(string(b), holder) {
			break
		}
		select {
		case <-first.done:
			t.Fatalf("the first run ended: %v\n%s", first.err, first.stderr.String())
		case <-ctx.Done():
			t.Fatal("the first run never owned partition 0")
		case <-time.After(10 * time.Millisecond):
		}
	}

	t0 := time.Now()
	second, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
	second.waitExit(t, ctx)
	if msg := second.stderr.String(); second.err == nil || second.stdout.Len() != 0 ||
		!strings.Contains(msg, "partition 0 of the jetstream source") || !strings.Contains(msg, "owned by "+holder) {
		t.Fatalf("second run beside the first: want a failure naming partition 0 and %q; got %v, stdout %q\nstderr:\n%s",
			holder, second.err, second.stdout.String(), msg)
	}
	stopped := time.Since(t0)

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.waitExit(t, ctx)
	t1 := time.Now()
	got := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
	// The second run stopped after its own_wait rather than waiting for
	// the owner: it did no more than start, connect and wait 1s, less
	// than this run, which also learned the whole stream; three times this
	// run is the margin, so that a loaded machine does not fail the test.
	if whole := time.Since(t1); stopped > time.Second+3*whole {
		t.Errorf("the second run took %v to stop, want about its 1s own_wait (at most 1s + 3× the %v of a run of the whole stream)",
			stopped.Round(time.Millisecond), whole.Round(time.Millisecond))
	}
	sameReport(t, "run after the owner was killed", normReport(t, "run", got, "jetstream:EVENTS/owner", 5000), want)
}
