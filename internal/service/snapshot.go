package service

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/streamlearn/streamlearn/internal/regret"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// snapshots is what a Service publishes for readers on other goroutines:
// the latest Snapshot, and, while someone asks for predictions, the
// copies of the models that answer them. The loop writes it; readers
// see only snap and copies, whose values are immutable once stored.
type snapshots struct {
	snap         atomic.Pointer[Snapshot]
	nextSnapshot time.Time
	curves       [][][]regret.Point // the last copy of the curves, shared by snapshots
	curvesAt     time.Time
	curvesEvents uint64                         // the events of every model at that copy
	copies       atomic.Pointer[serving.Copies] // model copies for predictions; nil while idle
	serveUntil   atomic.Int64                   // Unix ns until which serving is active
	digestUntil  atomic.Int64                   // Unix ns until which snapshots carry state digests (WantDigests)
}

// curvesInterval is the shortest time between two copies of the curves
// into snapshots (Snapshot.Curves): a dashboard polls every second, and a
// copy is a pass over every learner's samples. Snapshots in between share
// the last copy.
const curvesInterval = 250 * time.Millisecond

// Snapshot returns the latest published snapshot; it is never nil. Run
// publishes one when it starts, every SnapshotInterval while it runs
// (also while the source is idle) and one after its final commit. Before
// Run, it has Started false and no reports. Safe for concurrent use.
func (s *Service) Snapshot() *Snapshot { return s.snaps.snap.Load() }

// WantDigests makes the snapshots carry the learners' state digests for
// the next ServeIdle, and waits until one does (or ctx is done): for
// readers of the reports (GET /v1/report). Safe for concurrent use.
func (s *Service) WantDigests(ctx context.Context) {
	s.snaps.digestUntil.Store(time.Now().Add(serving.ServeIdle).UnixNano())
	for {
		if snap := s.snaps.snap.Load(); snap == nil || snap.Digests || !snap.Started && len(snap.Reports) == 0 {
			return
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// publishSnapshot asks the models that learned since the last snapshot
// for their reports (the workers answer once they have learned every
// record handed over so far) and publishes them with the last reports of
// the others: a model at rest costs its worker nothing.
func (s *Service) publishSnapshot(ctx context.Context) error {
	now := time.Now()
	parts := s.models.sorted()
	curvesDue := s.opt.HistoryPoints > 0 && (len(s.snaps.curves) != len(parts) || s.draining || now.Sub(s.snaps.curvesAt) >= curvesInterval)
	serve := now.UnixNano() <= s.snaps.serveUntil.Load()
	digests := s.draining || now.UnixNano() <= s.snaps.digestUntil.Load()
	old := s.snaps.copies.Load()
	servedAt := func(w *worker) uint64 {
		if old != nil {
			if pr, ok := old.Of(w.part); ok {
				return pr.Events
			}
		}
		return noCopy
	}
	changed := make([]int32, 0, len(parts))
	idle := s.opt.Config.Models.Idle
	for _, part := range parts {
		w := s.models.workers[part]
		// Models per key have no curves; with models.idle, they are asked
		// at rest too, to evict the models gone idle.
		curves := curvesDue && w.snapshot.curves == nil && w.m.k == nil
		idleDue := w.m.k != nil && idle > 0 && now.Sub(w.snapshot.idleAt) >= idle/2
		if w.snapshot.handed || !w.snapshot.ok || curves || idleDue || digests && !w.snapshot.digests || serve && servedAt(w) != w.snapshot.report.Events {
			changed = append(changed, part)
			w.snapshot.idleAt = now
		}
	}
	answers, err := s.askAll(ctx, changed, func(w *worker) *ask {
		a := &ask{kind: askSnapshot, curves: curvesDue, serve: serve, servedAt: servedAt(w), digests: digests}
		if old != nil {
			a.served, _ = old.Of(w.part)
		}
		return a
	})
	if err != nil {
		return err
	}
	served := make(map[int32]*serving.Predictor, len(answers))
	for _, a := range answers {
		w := a.w
		// The answer holds every record handed over before the question
		// (the loop hands over none while it waits).
		w.snapshot.handed = false
		w.snapshot.report, w.snapshot.ok, w.snapshot.curves = a.report, true, a.curves // nil without curvesDue: stale
		w.snapshot.digests = digests
		if a.served != nil {
			served[w.part] = a.served
		}
	}
	reports, events := s.snapshotReports(parts, now)
	if curvesDue && (len(s.snaps.curves) != len(parts) || events != s.snaps.curvesEvents) {
		curves := make([][][]regret.Point, len(parts))
		for i, part := range parts {
			curves[i] = s.models.workers[part].snapshot.curves
		}
		s.snaps.curves, s.snaps.curvesAt, s.snaps.curvesEvents = curves, now, events
	}
	durable := s.durableSince()
	allDigests := true
	for _, part := range parts {
		allDigests = allDigests && s.models.workers[part].snapshot.digests
	}
	s.snaps.snap.Store(&Snapshot{Time: now, Source: s.opt.Source.Name(), Reports: reports, Started: true, Durable: durable, Curves: s.snaps.curves, Digests: allDigests})
	s.refreshServing(now, serve, old, parts, served)
	s.snaps.nextSnapshot = time.Now().Add(s.opt.SnapshotInterval)
	return nil
}

// snapshotReports returns the reports of the models of parts, in their
// order, as the snapshots that last asked them left them, with Seconds as
// of now, and the records they counted in all.
func (s *Service) snapshotReports(parts []int32, now time.Time) ([]Report, uint64) {
	reports := make([]Report, len(parts))
	var events uint64
	for i, part := range parts {
		w := s.models.workers[part]
		reports[i] = w.snapshot.report
		// A model at rest: its last report, only later.
		reports[i].Seconds = now.Sub(w.m.started()).Seconds()
		events += w.snapshot.report.Events
	}
	return reports, events
}

// durableSince returns Snapshot.Durable: the earliest time the state of
// a model's last commit was taken, of the models that learned since
// (zero when none did).
func (s *Service) durableSince() time.Time {
	var durable time.Time
	for _, w := range s.models.workers {
		if w.commit.dirty && (durable.IsZero() || w.commit.durableAt.Before(durable)) {
			durable = w.commit.durableAt
		}
	}
	return durable
}

// noCopy is the servedAt of a model without a copy for serving: no model
// has that many events, so its worker copies it.
const noCopy = ^uint64(0)

// askAll asks the workers of parts what mk says and returns their
// answers, in the order of parts, once every one has answered; the
// workers answer once they have processed every record handed over
// before. It returns the first error of an answer, or ctx's.
func (s *Service) askAll(ctx context.Context, parts []int32, mk func(*worker) *ask) ([]answer, error) {
	replies := make(chan answer, len(parts))
	for _, part := range parts {
		a := mk(s.models.workers[part])
		a.reply = replies
		if err := s.models.workers[part].ask(ctx, a); err != nil {
			return nil, err
		}
	}
	byPart := make(map[int32]answer, len(parts))
	for range parts {
		select {
		case a := <-replies:
			if a.err != nil {
				return nil, a.err
			}
			byPart[a.w.part] = a
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := make([]answer, len(parts))
	for i, part := range parts {
		out[i] = byPart[part]
	}
	return out, nil
}
