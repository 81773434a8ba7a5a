package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/streamlearn/streamlearn/internal/event"
)

// DeadLetter is a record that could not be used, with why.
type DeadLetter struct {
	Source    string       // file, topic or subject
	Partition int32        // the Kafka partition; 0 elsewhere
	Offset    int64        // line, offset or sequence of the record
	Key       []byte       // the record's key (the event's, or its producer's); nil when none
	Reason    event.Reason // bounded set, as counted
	Err       string       // the one-line error
	Raw       []byte       // the record's original bytes; valid during the call only
	Size      int          // the record\'s length when Raw holds only its start; 0 otherwise
}

// DeadLetters receives dead letters. DeadLetter must not retain d.Raw.
type DeadLetters interface {
	DeadLetter(d DeadLetter) error
}

// Replay runs every record of r through the pipeline until r is exhausted
// or ctx is done. Bad records are counted and, when dl is not nil, sent to
// dl; they never stop the replay. progress, when not nil, is called every
// 64k records with the number of records read so far.
func (p *Pipeline) Replay(ctx context.Context, r *event.Reader, dl DeadLetters, progress func(records uint64)) error {
	var (
		ev event.Event
		n  uint64
		de *event.Error
	)
	for {
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if progress != nil && n > 0 {
				progress(n)
			}
		}
		n++
		err := r.Next(&ev)
		switch {
		case err == nil:
			if _, reason := p.Process(&ev); reason != "" {
				msg := fmt.Sprintf("%s:%d: outside the domain of a hypothesis class", r.Name(), r.Offset())
				if err := p.deadLetter(dl, r.Name(), r.Offset(), reason, msg, r.Raw()); err != nil {
					return err
				}
			}
		case err == io.EOF:
			return nil
		case errors.As(err, &de):
			p.Reject(de.Reason)
			if err := p.deadLetter(dl, de.Source, de.Offset, de.Reason, de.Error(), r.Raw()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("replay: %w", err)
		}
	}
}

func (p *Pipeline) deadLetter(dl DeadLetters, source string, offset int64, reason event.Reason, msg string, raw []byte) error {
	if dl == nil {
		return nil
	}
	if err := dl.DeadLetter(DeadLetter{Source: source, Offset: offset, Reason: reason, Err: msg, Raw: raw}); err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	return nil
}
