package pipeline

import "github.com/streamlearn/streamlearn/internal/online"

// scaleAsObserved writes into dst what s.Transform(dst, x) writes, without
// updating s: for standard scaling, each slot's statistics are read with
// Scaler.Stats and the values of x folded into a copy, by the same
// arithmetic (Welford's update in River's form, with the product rounded
// before it is added, as online.Scaler documents), so the result is the
// same bits as Transform's, with the count of events Transform would have
// (online.StandardScale). The kinds without state scale as Scale does.
//
// Serving needs this: Process scales an event with the statistics updated
// by that event ("updated before use"), and a prediction served for the
// event must be the one Process would make, while leaving the statistics
// alone. It costs one Stats read per entry of x, and for a non-canonical x
// (repeated slots, which decoders never produce) a scan of x per entry.
//
// TODO(online owner): this belongs in online.Scaler, next to the update it
// mirrors; TestScaleAsObserved pins the two together until it moves.
func scaleAsObserved(s *online.Scaler, dst *online.Vector, x online.Vector) {
	if s.Kind() != online.ScaleStandard {
		s.Scale(dst, x)
		return
	}
	dst.Idx = append(dst.Idx[:0], x.Idx...)
	dst.Val = append(dst.Val[:0], x.Val...)
	val := dst.Val[:len(dst.Idx)]
	xval := x.Val[:len(x.Idx)]
	canonical := increasing(x.Idx)
	for k, i := range dst.Idx {
		n, mean, vari := s.Stats(i)
		if canonical {
			n, mean, vari = observe(n, mean, vari, xval[k])
		} else {
			// Transform observes all of x, then scales: fold in every value
			// at slot i, in order.
			for j, xi := range x.Idx {
				if xi == i {
					n, mean, vari = observe(n, mean, vari, xval[j])
				}
			}
		}
		val[k] = online.StandardScale(val[k], n, mean, vari, s.Events()+1)
	}
}

// observe is online's per-slot Welford update, operation for operation.
func observe(n uint64, mean, vari, v float64) (uint64, float64, float64) {
	n++
	fn := float64(n)
	old := mean
	mean = old + (v-old)/fn
	vari += (float64((v-old)*(v-mean)) - vari) / fn
	return n, mean, vari
}

// increasing reports whether idx is strictly increasing.
func increasing(idx []uint32) bool {
	for k := 1; k < len(idx); k++ {
		if idx[k] <= idx[k-1] {
			return false
		}
	}
	return true
}
