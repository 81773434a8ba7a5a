package service

import (
	"context"
	"fmt"
)

// startWarm makes m, partition's new model (no checkpoint holds it), the
// warm start's model, when there is one. It is the one place a new
// model is made (restore, and the reset and rebuild it chooses).
func (s *Service) startWarm(partition int32, m *model) error {
	w := s.opt.WarmStart
	if w == nil {
		return nil
	}
	if w.Err != nil {
		return fmt.Errorf("service: partition %d has no checkpoint, and its model cannot start from the warm start: %w", partition, w.Err)
	}
	if err := m.startFrom(w.Model.State, w.SHA256); err != nil {
		return fmt.Errorf("service: partition %d: warm start: the model %s: %w", partition, w.Path, err)
	}
	if m.p != nil && s.opt.HistoryPoints > 0 && m.p.Tracker().History() == nil {
		// A file written without curves (replay --save): the dashboard's
		// curves start here.
		m.p.Tracker().EnableHistory(s.opt.HistoryPoints)
	}
	s.logger.Info("model started from the warm start", "partition", partition, "model", w.String(), "events", m.events())
	return nil
}

// warmAssigned makes, with a warm start, the model of every partition a
// consumer group assigned to the service that has none yet: the trained
// model serves before the partition brings a record.
func (s *Service) warmAssigned(ctx context.Context) error {
	if s.opt.WarmStart == nil {
		return nil
	}
	owned, live := s.assignments()
	if !live {
		return nil
	}
	for _, p := range owned {
		if _, ok := s.workers[p]; !ok {
			if _, err := s.worker(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}
