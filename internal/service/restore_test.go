package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/settings"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// A restore is checked against what the broker says: a checkpoint that is
// missing while the broker holds a committed position, one behind the
// commit, one of another partition, one of a stream deleted and created
// again under the same name — each stops Run with a RestoreError naming
// the partition, the committed position and the ways out, before any
// record is learned, on Kafka and on JetStream. With Reset the model of
// that partition starts afresh from the committed position: the run learns
// exactly the records after it.

// restoreRun runs a service over src until its end, checkpointing into
// the directory dir every 100 records, and returns its error and reports.
func restoreRun(t *testing.T, c *config.Config, src connectors.Source, dir string, on Mismatch) ([]Report, error) {
	t.Helper()
	return restoreRunTo(t, c, src, dir, on, discardSink{})
}

// restoreRunTo is restoreRun with predictions and dead letters published
// to out.
func restoreRunTo(t *testing.T, c *config.Config, src connectors.Source, dir string, on Mismatch, out connectors.Sink) ([]Report, error) {
	t.Helper()
	store, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return restoreRunStore(t, c, src, store, on, out)
}

// restoreRunStore is restoreRunTo with the checkpoints in store.
func restoreRunStore(t *testing.T, c *config.Config, src connectors.Source, store checkpoint.Store, on Mismatch, out connectors.Sink) ([]Report, error) {
	t.Helper()
	s := newService(t, Options{Config: c, Source: src, Checkpoints: store, CommitEvery: 100, OnMismatch: on, Predictions: out, DeadLetters: out})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := errors.Join(s.Run(ctx), src.Close())
	reps, rerr := s.Reports()
	if rerr != nil {
		t.Fatal(rerr)
	}
	return reps, err
}

// wantRestoreError checks that err is a RestoreError of partition with the
// committed position committed and the problem's words in it.
func wantRestoreError(t *testing.T, err error, partition int32, committed int64, problem string) {
	t.Helper()
	var re *RestoreError
	if !errors.As(err, &re) {
		t.Fatalf("run: %v, want a RestoreError", err)
	}
	if re.Partition != partition || re.Committed != committed || !strings.Contains(re.Problem, problem) {
		t.Errorf("RestoreError of partition %d, committed %d, problem %q; want partition %d, committed %d, %q",
			re.Partition, re.Committed, re.Problem, partition, committed, problem)
	}
	msg := err.Error()
	want := []string{fmt.Sprintf("partition %d", partition), "--rebuild", "--reset", "--accept"}
	if committed >= 0 && (problem == "no checkpoint" || problem == "behind") {
		want = append(want, fmt.Sprintf("position %d was committed", committed))
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
}

// copyFile copies the file src over dst, as an operator restoring a
// backup would.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rounds returns the rounds of the first learner of the model of
// partition in reps, -1 when there is none.
func rounds(reps []Report, partition int32) int64 {
	for _, r := range reps {
		if r.Partition == partition {
			return int64(r.Report.Learners[0].Rounds)
		}
	}
	return -1
}

func TestRestoreCheckedKafka(t *testing.T) {
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	brokers := kafkaCluster(t, 2, "events")
	cfg := kafkaTestConfig(brokers, "events", "restore")
	publish := func(n int, seed uint64) {
		values := genEvents(n, seed, 0.1, 0, 0)
		keys := make([][]byte, n)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "k%d", i%8)
		}
		sink, err := connectors.NewKafkaSink(cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		publishAll(t, sink, values, keys)
	}
	dir, empty := t.TempDir(), t.TempDir()
	file := func(dir string, p int32) string { return filepath.Join(dir, checkpoint.ObjectName(p)) }

	publish(600, 1)
	first, err := restoreRun(t, c, openKafka(t, cfg), dir, MismatchFail)
	if err != nil {
		t.Fatal(err)
	}
	end0 := rounds(first, 0) - 1 // every record is labeled and good: offsets 0..rounds-1
	if end0 < 0 || rounds(first, 1) <= 0 {
		t.Fatalf("first run: %d models, want both partitions learned", len(first))
	}
	old := filepath.Join(t.TempDir(), "old.ckpt")
	copyFile(t, file(dir, 0), old)
	publish(400, 2)
	second, err := restoreRun(t, c, openKafka(t, cfg), dir, MismatchFail)
	if err != nil {
		t.Fatal(err)
	}
	all0 := rounds(second, 0)
	if all0 <= end0+1 {
		t.Fatalf("second run: partition 0 at %d rounds, want more than %d", all0, end0+1)
	}

	t.Run("missing", func(t *testing.T) {
		// Nothing left to read: the owned partitions are checked at the
		// end, in order.
		_, err := restoreRun(t, c, openKafka(t, cfg), empty, MismatchFail)
		wantRestoreError(t, err, 0, rounds(second, 0)-1, "no checkpoint")
	})
	t.Run("behind", func(t *testing.T) {
		d := t.TempDir()
		copyFile(t, old, file(d, 0))
		copyFile(t, file(dir, 1), file(d, 1))
		_, err := restoreRun(t, c, openKafka(t, cfg), d, MismatchFail)
		wantRestoreError(t, err, 0, all0-1, "behind")
		// Accepted, the old checkpoint is the model, and nothing is left
		// to read: partition 0 reports the rounds of the first run.
		reps, err := restoreRun(t, c, openKafka(t, cfg), d, MismatchAccept)
		if err != nil {
			t.Fatal(err)
		}
		if got := rounds(reps, 0); got != end0+1 {
			t.Errorf("accepted: partition 0 at %d rounds, want the old checkpoint's %d", got, end0+1)
		}
		// The acceptance holds: the next run restores the same model.
		reps, err = restoreRun(t, c, openKafka(t, cfg), d, MismatchFail)
		if err != nil {
			t.Fatalf("run after the acceptance: %v", err)
		}
		if got := rounds(reps, 0); got != end0+1 {
			t.Errorf("run after the acceptance: partition 0 at %d rounds, want %d", got, end0+1)
		}
	})
	t.Run("other-partition", func(t *testing.T) {
		d := t.TempDir()
		copyFile(t, file(dir, 1), file(d, 0))
		copyFile(t, file(dir, 1), file(d, 1))
		_, err := restoreRun(t, c, openKafka(t, cfg), d, MismatchFail)
		wantRestoreError(t, err, 0, all0-1, "of partition 1")
		// Reset, with nothing left to read: the fresh model's checkpoint
		// is at the committed position, and the next run restores it.
		if _, err := restoreRun(t, c, openKafka(t, cfg), d, MismatchReset); err != nil {
			t.Fatal(err)
		}
		reps, err := restoreRun(t, c, openKafka(t, cfg), d, MismatchFail)
		if err != nil {
			t.Fatalf("run after the reset: %v", err)
		}
		if got := rounds(reps, 0); got != 0 {
			t.Errorf("run after the reset: partition 0 at %d rounds, want a fresh model's 0", got)
		}
	})
	t.Run("rebuild", func(t *testing.T) {
		// Each case rebuilt: both models end as the uninterrupted run's,
		// from the first record (no checkpoint, another partition's) or
		// from the old checkpoint (behind).
		open := func() connectors.Source { return openKafka(t, cfg) }
		wantRebuilt(t, c, open, t.TempDir(), second)
		d := t.TempDir()
		copyFile(t, old, file(d, 0))
		wantRebuilt(t, c, open, d, second)
		d = t.TempDir()
		copyFile(t, file(dir, 1), file(d, 0))
		copyFile(t, file(dir, 1), file(d, 1))
		wantRebuilt(t, c, open, d, second)
	})
	t.Run("reset", func(t *testing.T) {
		// A group of its own, committed to the end of both partitions
		// with its checkpoints elsewhere, then 50 new records: without
		// a checkpoint the first record stops the run; with Reset both
		// models start afresh at the committed positions, and the 50 new
		// records are exactly what they learn.
		rcfg := cfg
		rcfg.Group = "restore-reset"
		if _, err := restoreRun(t, c, openKafka(t, rcfg), t.TempDir(), MismatchFail); err != nil {
			t.Fatal(err)
		}
		publish(50, 3)
		d := t.TempDir()
		_, err := restoreRun(t, c, openKafka(t, rcfg), d, MismatchFail)
		p := errPartition(err)
		wantRestoreError(t, err, p, rounds(second, p)-1, "no checkpoint")
		reps, err := restoreRun(t, c, openKafka(t, rcfg), d, MismatchReset)
		if err != nil {
			t.Fatal(err)
		}
		if got := rounds(reps, 0) + rounds(reps, 1); got != 50 {
			t.Errorf("after the reset: %d rounds in all, want the 50 new records", got)
		}
		// The models' checkpoints now hold the committed positions: the
		// next run restores them without a word, and their rounds.
		reps, err = restoreRun(t, c, openKafka(t, rcfg), d, MismatchFail)
		if err != nil {
			t.Fatalf("run after the reset: %v", err)
		}
		if got := rounds(reps, 0) + rounds(reps, 1); got != 50 {
			t.Errorf("run after the reset: %d rounds in all, want the 50 learned since the reset", got)
		}
	})
}

// wantRebuilt runs a service with Rebuild over the source open returns,
// on the checkpoints in dir, and checks that every model in want (the
// reports of an uninterrupted run that read the whole stream) ends equal
// to it, and that the rebuild published nothing: the outputs of the
// records learned again went out when they were first learned, and
// nothing new is left to read. A run after it restores the rebuilt models
// from their checkpoints, without a word.
func wantRebuilt(t *testing.T, c *config.Config, open func() connectors.Source, dir string, want []Report) {
	t.Helper()
	out := &memSink{}
	reps, err := restoreRunTo(t, c, open(), dir, MismatchRebuild, out)
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if n := len(out.messages()); n != 0 {
		t.Errorf("rebuild published %d predictions or dead letters, want none", n)
	}
	same := func(what string, reps []Report) {
		t.Helper()
		if len(reps) != len(want) {
			t.Fatalf("%s: %d models, want %d", what, len(reps), len(want))
		}
		for i, r := range reps {
			if r.Partition != want[i].Partition {
				t.Fatalf("%s: model %d of partition %d, want %d", what, i, r.Partition, want[i].Partition)
			}
			sameReport(t, fmt.Sprintf("%s: partition %d", what, r.Partition), r.Report, want[i].Report)
		}
	}
	same("rebuilt", reps)
	reps, err = restoreRun(t, c, open(), dir, MismatchFail)
	if err != nil {
		t.Fatalf("run after the rebuild: %v", err)
	}
	same("run after the rebuild", reps)
}

// errPartition returns the partition of a RestoreError, -1 otherwise.
func errPartition(err error) int32 {
	var re *RestoreError
	if errors.As(err, &re) {
		return re.Partition
	}
	return -1
}

// jsRestoreFixture starts an embedded server with stream EVENTS on
// subject events and returns the example configuration at 2^12 slots, a
// client, a function that opens durable on the stream (until its end),
// and one that publishes n events of seed.
func jsRestoreFixture(t *testing.T, durable string) (*config.Config, jetstream.JetStream, func() connectors.Source, func(n int, seed uint64)) {
	t.Helper()
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	url := testbroker.NATS(t, "EVENTS", "events")
	ncfg := connectors.NATSConfig{URL: url, Stream: "EVENTS", Subject: "events", Durable: durable, JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Second}}
	open := func() connectors.Source {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		src, err := connectors.NewJetStreamSource(ctx, ncfg, true)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	publish := func(n int, seed uint64) {
		sink, err := connectors.NewJetStreamSink(connectors.NATSConfig{URL: url}, "EVENTS", "events")
		if err != nil {
			t.Fatal(err)
		}
		publishAll(t, sink, genEvents(n, seed, 0.1, 0, 0), nil)
	}
	return c, testbroker.JetStream(t, url), open, publish
}

// jsBehind runs c over 500 events of the fixture's stream with
// checkpoints in dir, keeps that checkpoint aside at old, and runs c again
// over 300 more: a checkpoint behind the commit, for the tests that put
// old back. It returns the reports of both runs.
func jsBehind(t *testing.T, c *config.Config, open func() connectors.Source, publish func(int, uint64), dir string) (first, second []Report, old string) {
	t.Helper()
	publish(500, 1)
	first, err := restoreRun(t, c, open(), dir, MismatchFail)
	if err != nil {
		t.Fatal(err)
	}
	old = filepath.Join(t.TempDir(), "old.ckpt")
	copyFile(t, filepath.Join(dir, checkpoint.ObjectName(0)), old)
	publish(300, 2)
	if second, err = restoreRun(t, c, open(), dir, MismatchFail); err != nil {
		t.Fatal(err)
	}
	return first, second, old
}

func TestRestoreCheckedJetStream(t *testing.T) {
	c, js, open, publish := jsRestoreFixture(t, "restore")
	dir := t.TempDir()
	_, second, old := jsBehind(t, c, open, publish, dir)

	t.Run("missing", func(t *testing.T) {
		d := t.TempDir()
		_, err := restoreRun(t, c, open(), d, MismatchFail)
		wantRestoreError(t, err, 0, 800, "no checkpoint")
		wantRebuilt(t, c, open, d, second)
	})
	t.Run("behind", func(t *testing.T) {
		d := t.TempDir()
		copyFile(t, old, filepath.Join(d, checkpoint.ObjectName(0)))
		_, err := restoreRun(t, c, open(), d, MismatchFail)
		wantRestoreError(t, err, 0, 800, "behind")
		wantRebuilt(t, c, open, d, second)
	})
	t.Run("recreated", func(t *testing.T) {
		// The stream deleted and created again, its durable with it:
		// 200 new events numbered from 1, and a checkpoint at 800 that
		// would skip them all.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, "EVENTS"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // a creation time of its own
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events"}}); err != nil {
			t.Fatal(err)
		}
		publish(200, 3)
		_, err := restoreRun(t, c, open(), dir, MismatchFail)
		wantRestoreError(t, err, 0, -1, "the checkpoint is of jetstream stream EVENTS created")
		reps, err := restoreRun(t, c, open(), dir, MismatchReset)
		if err != nil {
			t.Fatal(err)
		}
		if got := rounds(reps, 0); got != 200 {
			t.Errorf("after the reset: %d rounds, want the 200 events of the new stream", got)
		}
		// The old stream's checkpoint was moved aside, so the reset
		// model's checkpoints took its place: the next run restores it.
		reps, err = restoreRun(t, c, open(), dir, MismatchFail)
		if err != nil {
			t.Fatalf("run after the reset: %v", err)
		}
		if got := rounds(reps, 0); got != 200 {
			t.Errorf("run after the reset: %d rounds, want the 200 learned", got)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, checkpoint.ObjectName(0)+".dropped-*")); len(m) != 1 {
			t.Errorf("dropped checkpoints kept: %q, want the old stream's", m)
		}
	})
}

// A rebuild needs every record from the partition's first through the
// committed position: when retention or a purge removed the first ones,
// it stops with an error naming the partition, where its log now starts,
// and the other ways out, and writes no checkpoint.
func TestRebuildNotRetained(t *testing.T) {
	wantNotRetained := func(t *testing.T, err error, from, first int64, d string) {
		t.Helper()
		var nr *connectors.NotRetainedError
		if !errors.As(err, &nr) || nr.Partition != 0 || nr.From != from || nr.First != first {
			t.Fatalf("rebuild: %v, want a NotRetainedError of partition 0 from %d, first %d", err, from, first)
		}
		for _, w := range []string{"partition 0", "no checkpoint", "--reset", "--accept"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
		if _, err := os.Stat(filepath.Join(d, checkpoint.ObjectName(0))); !os.IsNotExist(err) {
			t.Errorf("a failed rebuild left a checkpoint of partition 0 (%v)", err)
		}
	}
	t.Run("kafka", func(t *testing.T) {
		c := loadExampleConfig(t)
		c.Features.Bits = 12
		cluster := testbroker.KafkaCluster(t, 1, "events")
		cfg := kafkaTestConfig(cluster.ListenAddrs(), "events", "rebuild")
		sink, err := connectors.NewKafkaSink(cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		publishAll(t, sink, genEvents(300, 1, 0.1, 0, 0), nil)
		if _, err := restoreRun(t, c, openKafka(t, cfg), t.TempDir(), MismatchFail); err != nil {
			t.Fatal(err)
		}
		if err := cluster.DeleteRecords("events", 0, 100); err != nil {
			t.Fatal(err)
		}
		d := t.TempDir()
		_, err = restoreRun(t, c, openKafka(t, cfg), d, MismatchRebuild)
		wantNotRetained(t, err, 0, 100, d)
	})
	wantGap := func(t *testing.T, err error, d string) {
		t.Helper()
		var nr *connectors.NotRetainedError
		if !errors.As(err, &nr) || nr.Partition != 0 || nr.Gap <= 0 || !strings.Contains(err.Error(), "removed from the middle") {
			t.Fatalf("rebuild over a gap: %v, want a NotRetainedError naming a gap", err)
		}
		if _, err := os.Stat(filepath.Join(d, checkpoint.ObjectName(0))); !os.IsNotExist(err) {
			t.Errorf("a failed rebuild left a checkpoint of partition 0 (%v)", err)
		}
	}
	t.Run("kafka-compacted", func(t *testing.T) {
		// Compaction keeps the last record of each key: the offsets of
		// the others are gone from the middle of the log.
		c := loadExampleConfig(t)
		c.Features.Bits = 12
		cluster := testbroker.KafkaCluster(t, 1)
		if err := cluster.CreateTopic("compacted", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
		cfg := kafkaTestConfig(cluster.ListenAddrs(), "compacted", "rebuild")
		values := genEvents(300, 1, 0.1, 0, 0)
		keys := make([][]byte, len(values))
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "k%d", i%8)
		}
		keys[0] = []byte("only-0")              // the log still starts at 0
		for i := 0; i < len(values); i += 100 { // batches: the last one is never compacted
			sink, err := connectors.NewKafkaSink(cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			publishAll(t, sink, values[i:i+100], keys[i:i+100])
		}
		if _, err := restoreRun(t, c, openKafka(t, cfg), t.TempDir(), MismatchFail); err != nil {
			t.Fatal(err)
		}
		cluster.Compact()
		d := t.TempDir()
		_, err := restoreRun(t, c, openKafka(t, cfg), d, MismatchRebuild)
		wantGap(t, err, d)
	})
	t.Run("jetstream-deleted", func(t *testing.T) {
		ctx, c, stream, open := jsCommitted(t)
		if err := stream.DeleteMsg(ctx, 150); err != nil {
			t.Fatal(err)
		}
		d := t.TempDir()
		_, err := restoreRun(t, c, open(), d, MismatchRebuild)
		wantGap(t, err, d)
	})
	t.Run("jetstream", func(t *testing.T) {
		ctx, c, stream, open := jsCommitted(t)
		if err := stream.Purge(ctx, jetstream.WithPurgeSequence(101)); err != nil {
			t.Fatal(err)
		}
		d := t.TempDir()
		_, err := restoreRun(t, c, open(), d, MismatchRebuild)
		wantNotRetained(t, err, 1, 101, d)
		// Purged to empty: the first sequence is the next one.
		if err := stream.Purge(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = restoreRun(t, c, open(), d, MismatchRebuild)
		wantNotRetained(t, err, 1, 301, d)
	})
}

// jsCommitted makes a stream of 300 events, learned and committed by a
// first run (its checkpoints thrown away), and returns a context for the
// test's damage to the stream, the configuration, the stream and the
// opener of its durable.
func jsCommitted(t *testing.T) (context.Context, *config.Config, jetstream.Stream, func() connectors.Source) {
	t.Helper()
	c, js, open, publish := jsRestoreFixture(t, "rebuild")
	publish(300, 1)
	if _, err := restoreRun(t, c, open(), t.TempDir(), MismatchFail); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	stream, err := js.Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, c, stream, open
}

// No false alarm: a new durable on a stream whose first records are gone
// (the server sets its ack floor below the first sequence, no commit),
// and a checkpoint behind a floor a purge moved past records nobody
// learned, restore without error.
func TestRestoreNoFalseAlarmJetStream(t *testing.T) {
	c, js, open, publish := jsRestoreFixture(t, "fresh")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	publish(300, 1)
	if err := stream.Purge(ctx, jetstream.WithPurgeSequence(101)); err != nil { // keeps 101..300
		t.Fatal(err)
	}
	dir := t.TempDir()
	reps, err := restoreRun(t, c, open(), dir, MismatchFail)
	if err != nil {
		t.Fatalf("new durable on a stream starting at 101: %v", err)
	}
	if got := rounds(reps, 0); got != 200 {
		t.Errorf("new durable: %d rounds, want the 200 records held", got)
	}
	// The checkpoint at 300; 200 more records, purged before anyone
	// reads them, then 50: the durable's floor moves to 500 past records
	// no model could learn.
	publish(200, 2)
	if err := stream.Purge(ctx, jetstream.WithPurgeSequence(501)); err != nil {
		t.Fatal(err)
	}
	publish(50, 3)
	cons, err := stream.Consumer(ctx, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := cons.Info(ctx); err != nil || info.AckFloor.Stream != 500 {
		t.Fatalf("after the purge the durable's ack floor is %v (%v), want 500: the case under test", info.AckFloor, err)
	}
	reps, err = restoreRun(t, c, open(), dir, MismatchFail)
	if err != nil {
		t.Fatalf("checkpoint at 300, stream purged to 501: %v", err)
	}
	if got := rounds(reps, 0); got != 250 {
		t.Errorf("after the purge: %d rounds, want 200 + the 50 records held", got)
	}
}

// One owner: while another process owns partition 0's checkpoints (two
// runs on one durable and one checkpoint directory or bucket would each
// learn the part of the stream the server gives it), a run stops within
// OwnWait with an error naming the partition and the holder, before it
// fetches or acknowledges anything; once the holder is gone the next run
// learns every event, as if the refused one had never run.
func TestOneOwnerJetStream(t *testing.T) {
	for _, kind := range []string{"dir", "bucket"} {
		t.Run(kind, func(t *testing.T) {
			c, js, open, publish := jsRestoreFixture(t, "owner")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Each store is another process's: its own directory handle
			// or its own bucket handle.
			newStore := func() interface {
				checkpoint.Store
				checkpoint.Owner
			} {
				if kind == "dir" {
					d, err := checkpoint.OpenDir(filepath.Join(t.TempDir(), "..", "ckpt"))
					if err != nil {
						t.Fatal(err)
					}
					return d
				}
				s, err := checkpoint.OpenObjectStore(ctx, js, "STATE", checkpoint.ObjectStoreConfig{})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			publish(500, 1)
			if _, err := restoreRunStore(t, c, open(), newStore(), MismatchFail, discardSink{}); err != nil {
				t.Fatal(err)
			}
			publish(300, 2)

			store := newStore()
			release, err := store.Own(ctx, 0, "pid 4242 on elsewhere since 2026-11-25T10:00:00Z")
			if err != nil {
				t.Fatal(err)
			}
			src := open()
			s := newService(t, Options{Config: c, Source: src, Checkpoints: newStore(), CommitEvery: 100, OwnWait: 200 * time.Millisecond, Predictions: discardSink{}})
			start := time.Now()
			err = errors.Join(s.Run(ctx), src.Close())
			took := time.Since(start)
			var held *checkpoint.HeldError
			if !errors.As(err, &held) || held.Partition != 0 || !strings.Contains(err.Error(), "partition 0 of jetstream:EVENTS/owner") ||
				!strings.Contains(err.Error(), "owned by pid 4242 on elsewhere since 2026-11-25T10:00:00Z") {
				t.Fatalf("run beside the owner: %v, want a HeldError naming partition 0 and pid 4242", err)
			}
			release()
			t1 := time.Now()
			reps, err := restoreRunStore(t, c, open(), newStore(), MismatchFail, discardSink{})
			if err != nil {
				t.Fatalf("run once the owner is gone: %v", err)
			}
			// Little more than the wait: the refused run did less than this
			// one, which learned all 800 events; 5s plus three times this
			// run is the margin, so that a loaded machine does not fail it.
			if whole := time.Since(t1); took < 200*time.Millisecond || took > 200*time.Millisecond+5*time.Second+3*whole {
				t.Errorf("refused after %v, want the 200ms wait and little more (a whole run took %v)", took, whole)
			}
			if got := rounds(reps, 0); got != 800 {
				t.Errorf("run once the owner is gone: %d rounds, want all 800", got)
			}
		})
	}
}
