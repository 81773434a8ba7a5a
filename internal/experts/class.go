package experts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"

	"github.com/streamlearn/streamlearn/internal/online"
)

// Class kinds, as typed in the config's class.kind.
const (
	KindThresholds   = "thresholds"
	KindIntervals    = "intervals"
	KindTable        = "table"
	KindStumps       = "stumps"
	KindConjunctions = "conjunctions"
)

// Size limits of a class. Each is checked by ClassSpec.Validate or NewClass
// and named in the error.
const (
	// MaxHypotheses is the largest |H|: a learner keeps a 64-bit mistake
	// count per hypothesis (8 MiB at the limit, in bit planes) and does
	// O(|H|/64) word operations per event.
	MaxHypotheses = 1 << 20
	// MaxTableWords bounds the label table of tabled kinds (table,
	// conjunctions): effective domain points × ⌈|H|/64⌉ words, 32 MiB at
	// the limit. Thresholds, intervals and stumps compute labels instead.
	MaxTableWords = 1 << 22
	// MaxConjunctionFeatures bounds conjunctions: |H| = 3^n + 1 over a
	// domain of 2^n points.
	MaxConjunctionFeatures = 10
)

// ClassSpec declares a finite hypothesis class: the config block `class:`.
// The zero value is invalid; Validate says which key is wrong.
type ClassSpec struct {
	// Kind is one of thresholds, intervals, table, stumps, conjunctions.
	Kind string `yaml:"kind"`
	// Feature is the feature thresholds, intervals and table read.
	Feature string `yaml:"feature"`
	// Features are the features of stumps (real valued) and conjunctions
	// (boolean: 0 or 1).
	Features []string `yaml:"features"`
	// Min, Max and Points define the grid of thresholds, intervals and
	// stumps: Points values a_0 < ... < a_{Points-1} evenly spaced from Min
	// to Max inclusive (a_0 = Min when Points is 1).
	Min    float64 `yaml:"min"`
	Max    float64 `yaml:"max"`
	Points int     `yaml:"points"`
	// Domain is the finite domain of a table: distinct values of Feature.
	Domain []float64 `yaml:"domain"`
	// Hypotheses are the hypotheses of a table, one row each, giving the
	// 0/1 label of every element of Domain in order.
	Hypotheses [][]int `yaml:"hypotheses"`
}

// Validate checks the spec without building the class. Messages name the
// offending key as class.<key>.
func (s ClassSpec) Validate() error {
	grid := func() error {
		if s.Points < 1 {
			return fmt.Errorf("class.points: %d, want at least 1", s.Points)
		}
		if math.IsNaN(s.Min) || math.IsInf(s.Min, 0) {
			return fmt.Errorf("class.min: %v is not finite", s.Min)
		}
		if math.IsNaN(s.Max) || math.IsInf(s.Max, 0) {
			return fmt.Errorf("class.max: %v is not finite", s.Max)
		}
		if s.Points > 1 && !(s.Max > s.Min) {
			return fmt.Errorf("class.max: %v, want greater than class.min (%v) when class.points > 1", s.Max, s.Min)
		}
		if s.Points > MaxHypotheses {
			return fmt.Errorf("class.points: %d, want at most %d", s.Points, MaxHypotheses)
		}
		return nil
	}
	unused := func(keys ...string) error {
		for _, k := range keys {
			set := false
			switch k {
			case "feature":
				set = s.Feature != ""
			case "features":
				set = s.Features != nil
			case "min":
				set = s.Min != 0
			case "max":
				set = s.Max != 0
			case "points":
				set = s.Points != 0
			case "domain":
				set = s.Domain != nil
			case "hypotheses":
				set = s.Hypotheses != nil
			}
			if set {
				return fmt.Errorf("class.%s: not used by kind %s", k, s.Kind)
			}
		}
		return nil
	}
	features := func() error {
		if len(s.Features) == 0 {
			return errors.New("class.features: missing")
		}
		seen := map[string]bool{}
		for _, f := range s.Features {
			if f == "" {
				return errors.New("class.features: empty feature name")
			}
			if seen[f] {
				return fmt.Errorf("class.features: %q listed twice", f)
			}
			seen[f] = true
		}
		return nil
	}
	switch s.Kind {
	case KindThresholds, KindIntervals:
		if s.Feature == "" {
			return errors.New("class.feature: missing")
		}
		if err := unused("features", "domain", "hypotheses"); err != nil {
			return err
		}
		if err := grid(); err != nil {
			return err
		}
		if s.Kind == KindIntervals {
			if n := s.Points * (s.Points + 1) / 2; s.Points > 1<<12 || n > MaxHypotheses {
				return fmt.Errorf("class.points: %d intervals have more than %d hypotheses", s.Points, MaxHypotheses)
			}
		}
	case KindTable:
		if s.Feature == "" {
			return errors.New("class.feature: missing")
		}
		if err := unused("features", "min", "max", "points"); err != nil {
			return err
		}
		if len(s.Domain) == 0 {
			return errors.New("class.domain: missing")
		}
		seen := map[float64]bool{}
		for i, v := range s.Domain {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("class.domain[%d]: %v is not finite", i, v)
			}
			if seen[v] {
				return fmt.Errorf("class.domain[%d]: %v listed twice", i, v)
			}
			seen[v] = true
		}
		if len(s.Hypotheses) == 0 {
			return errors.New("class.hypotheses: missing")
		}
		if len(s.Hypotheses) > MaxHypotheses {
			return fmt.Errorf("class.hypotheses: %d rows, want at most %d", len(s.Hypotheses), MaxHypotheses)
		}
		for j, row := range s.Hypotheses {
			if len(row) != len(s.Domain) {
				return fmt.Errorf("class.hypotheses[%d]: %d labels, want one per class.domain element (%d)", j, len(row), len(s.Domain))
			}
			for i, b := range row {
				if b != 0 && b != 1 {
					return fmt.Errorf("class.hypotheses[%d][%d]: %d, want 0 or 1", j, i, b)
				}
			}
		}
		if len(s.Domain)*words(len(s.Hypotheses)) > MaxTableWords {
			return fmt.Errorf("class.hypotheses: table of %d×%d labels is over the size limit", len(s.Hypotheses), len(s.Domain))
		}
	case KindStumps:
		if err := unused("feature", "domain", "hypotheses"); err != nil {
			return err
		}
		if err := features(); err != nil {
			return err
		}
		if err := grid(); err != nil {
			return err
		}
		if n := 2 * len(s.Features) * s.Points; n > MaxHypotheses {
			return fmt.Errorf("class.points: %d stumps over %d features is more than %d hypotheses", n, len(s.Features), MaxHypotheses)
		}
	case KindConjunctions:
		if err := unused("feature", "min", "max", "points", "domain", "hypotheses"); err != nil {
			return err
		}
		if err := features(); err != nil {
			return err
		}
		if len(s.Features) > MaxConjunctionFeatures {
			return fmt.Errorf("class.features: %d boolean features, want at most %d for conjunctions", len(s.Features), MaxConjunctionFeatures)
		}
	case "":
		return errors.New("class.kind: missing")
	default:
		return fmt.Errorf("class.kind: unknown kind %q (want thresholds, intervals, table, stumps or conjunctions)", s.Kind)
	}
	return nil
}

// A Class is a finite hypothesis class H = {h_0, ..., h_{n-1}} over events.
// It maps an event's vector to a point of its finite effective domain
// (the points no two of which every hypothesis labels alike) and gives,
// for that point, the Set of hypotheses that say 1 there.
//
// A Class is immutable once built and safe for concurrent use; learners
// share it.
type Class struct {
	spec  ClassSpec
	kind  string
	n     int      // |H|
	w     int      // words of a Set
	full  Set      // H
	slots []uint32 // feature slots: one for thresholds/intervals/table
	grid  []float64
	// perStep is (Points-1)/(Max-Min), the grid's values per unit: where
	// gridPosition starts looking (0 with fewer than two points).
	perStep float64
	// Tabled kinds (table, conjunctions): cols holds the label Set of
	// each effective point.
	cols []uint64
	np   int // effective domain points; -1 when too many to enumerate
	// table: the domain sorted, and each sorted value's point index.
	sorted []float64
	perm   []int32
	fp     uint64 // fingerprint of the spec and bits, checked by checkpoints

	ld ldimIndex // filled on first use (PrepareLdim)
}

// NewClass builds the class spec declares over a hashed space of 2^bits
// slots (features are looked up at online.Slot(name, online.Mask(bits))).
// It does no Littlestone-dimension work: that is PrepareLdim's, on first
// use by SOA, so Consistent, Halving and Weighted-Majority take any class
// within the memory limits (MaxHypotheses, MaxTableWords).
func NewClass(spec ClassSpec, bits uint) (*Class, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if bits > online.MaxBits {
		return nil, fmt.Errorf("class: %d feature bits, want at most %d", bits, online.MaxBits)
	}
	mask := online.Mask(bits)
	c := &Class{spec: spec, kind: spec.Kind}
	if spec.Feature != "" {
		c.slots = []uint32{online.Slot(spec.Feature, mask)}
	}
	for _, f := range spec.Features {
		c.slots = append(c.slots, online.Slot(f, mask))
	}
	if spec.Points > 0 {
		k := spec.Points
		c.grid = make([]float64, k)
		for i := range c.grid {
			if k == 1 {
				c.grid[i] = spec.Min
			} else {
				c.grid[i] = spec.Min + (spec.Max-spec.Min)*float64(i)/float64(k-1)
			}
		}
		if k > 1 {
			c.grid[k-1] = spec.Max
			c.perStep = float64(k-1) / (spec.Max - spec.Min)
		}
		for i := 1; i < k; i++ {
			if !(c.grid[i] > c.grid[i-1]) {
				return nil, fmt.Errorf("class.points: %d points are too many to space distinctly between %v and %v", k, spec.Min, spec.Max)
			}
		}
	}
	k := spec.Points
	switch spec.Kind {
	case KindThresholds:
		c.n, c.np = k, k+1
	case KindIntervals:
		c.n, c.np = k*(k+1)/2, 2*k+1
	case KindTable:
		c.n, c.np = len(spec.Hypotheses), len(spec.Domain)
	case KindStumps:
		c.n = 2 * len(spec.Features) * k
		c.np = 1
		for range spec.Features {
			if c.np > MaxGenericPoints/(k+1) {
				c.np = -1
				break
			}
			c.np *= k + 1
		}
	case KindConjunctions:
		c.n, c.np = pow3(len(spec.Features))+1, 1<<len(spec.Features)
	}
	c.w = words(c.n)
	c.full = make(Set, c.w)
	c.full.setRange(0, c.n)
	switch spec.Kind {
	case KindTable, KindConjunctions:
		if c.np*c.w > MaxTableWords {
			return nil, fmt.Errorf("class.points: label table of %d points × %d hypotheses is over the size limit", c.np, c.n)
		}
		c.cols = make([]uint64, c.np*c.w)
		c.buildTable()
	}
	if spec.Kind == KindTable {
		c.sorted = slices.Clone(spec.Domain)
		idx := make([]int32, len(spec.Domain))
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortFunc(idx, func(a, b int32) int {
			switch x, y := spec.Domain[a], spec.Domain[b]; {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		})
		for i, j := range idx {
			c.sorted[i] = spec.Domain[j]
		}
		c.perm = idx
	}
	c.fp = fingerprint(spec, bits)
	return c, nil
}

func pow3(n int) int {
	p := 1
	for range n {
		p *= 3
	}
	return p
}

// intervalIndex returns the hypothesis index of [a_i, a_j] among k points:
// rows by i, then j from i to k-1.
func intervalIndex(i, j, k int) int { return i*k - i*(i-1)/2 + (j - i) }

func (c *Class) col(p int) Set { return Set(c.cols[p*c.w : (p+1)*c.w]) }

func (c *Class) buildTable() {
	s := c.spec
	switch c.kind {
	case KindTable:
		for j, row := range s.Hypotheses {
			for p, b := range row {
				if b == 1 {
					c.col(p).Add(j)
				}
			}
		}
	case KindConjunctions:
		n := len(s.Features)
		// Hypothesis h < 3^n has trit t_v of variable v (h = Σ t_v 3^v):
		// 0 the variable is absent, 1 the literal x_v, 2 the literal ¬x_v.
		// Hypothesis 3^n is the empty (always 0) conjunction.
		for h := range pow3(n) {
			for p := range c.np {
				ok, r := true, h
				for v := range n {
					t := r % 3
					r /= 3
					bit := p>>v&1 == 1
					if (t == 1 && !bit) || (t == 2 && bit) {
						ok = false
						break
					}
				}
				if ok {
					c.col(p).Add(h)
				}
			}
		}
	}
}

func fingerprint(s ClassSpec, bits uint) uint64 {
	h := fnv.New64a()
	var b []byte
	str := func(x string) {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		b = append(b, x...)
	}
	f64 := func(x float64) { b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x)) }
	str(s.Kind)
	str(s.Feature)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s.Features)))
	for _, f := range s.Features {
		str(f)
	}
	f64(s.Min)
	f64(s.Max)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.Points))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s.Domain)))
	for _, v := range s.Domain {
		f64(v)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s.Hypotheses)))
	for _, row := range s.Hypotheses {
		for _, v := range row {
			b = append(b, byte(v))
		}
	}
	b = append(b, byte(bits))
	h.Write(b)
	return h.Sum64()
}

// Len returns |H|.
func (c *Class) Len() int { return c.n }

// Kind returns the class kind.
func (c *Class) Kind() string { return c.kind }

// Spec returns the spec the class was built from.
func (c *Class) Spec() ClassSpec { return c.spec }

// NewSet returns an empty Set sized for the class.
func (c *Class) NewSet() Set { return make(Set, c.w) }

// All returns a new Set holding every hypothesis: H.
func (c *Class) All() Set { return slices.Clone(c.full) }

// gridPosition returns position(c.grid, v): it guesses from the grid's
// even spacing and moves to the exact answer, one step or none, rather than
// searching.
func (c *Class) gridPosition(v float64) int {
	g := c.grid
	f := (v - g[0]) * c.perStep
	var p int
	switch {
	case !(f >= 0): // below the grid's first value, or NaN
		p = 0
	case f >= float64(len(g)-1):
		p = len(g)
	default:
		p = int(f) + 1
	}
	for p > 0 && !(g[p-1] <= v) {
		p--
	}
	for p < len(g) && g[p] <= v {
		p++
	}
	return p
}

// position returns the number of grid values ≤ v (0 for NaN).
func position(grid []float64, v float64) int {
	lo, hi := 0, len(grid)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if grid[m] <= v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// InDomain reports whether x lies in the class's domain: for a table, the
// feature's value is one of class.domain; for conjunctions, every feature
// is 0 or 1; for the grid kinds, every feature value is not NaN. Events
// outside the domain should be rejected (reason "domain") before any
// learner sees them; learners treat them as described in the package doc.
func (c *Class) InDomain(x online.Vector) bool { return c.point(x) >= 0 }

// DomainTerms describes the decoded events InDomain accepts as a sorted
// list of terms, one per feature it constrains: `boolean "F"` (0 or 1:
// conjunctions) or `table "F" V1 V2 ...` (one of a table's domain
// values, ascending), F quoted as by strconv.Quote. The grid kinds
// (thresholds, intervals, stumps) refuse only NaN, which no decoded event
// holds (its values are finite), and have none. The domain is the events
// every term accepts, so classes of equal terms (of any kinds and
// hypotheses) accept the same events, and the events a list of classes
// all accept are those the union of their terms does. Unequal terms may
// still accept the same events (a table of 0 and 1 and a conjunction's
// feature; two names hashed to one slot). The spec must be valid.
func (s ClassSpec) DomainTerms() []string {
	var t []string
	switch s.Kind {
	case KindConjunctions:
		for _, f := range s.Features {
			t = append(t, "boolean "+strconv.Quote(f))
		}
	case KindTable:
		vs := slices.Clone(s.Domain)
		slices.Sort(vs)
		b := []byte("table " + strconv.Quote(s.Feature))
		for _, v := range vs {
			b = append(b, ' ')
			b = strconv.AppendFloat(b, v+0, 'g', -1, 64) // +0: -0 is 0
		}
		t = []string{string(b)}
	}
	slices.Sort(t)
	return slices.Compact(t)
}

// point returns the effective domain point of x, or -1 outside the
// domain. For stumps it returns 0 for every in-domain x (labels are
// composed per feature instead).
func (c *Class) point(x online.Vector) int {
	switch c.kind {
	case KindThresholds:
		v := x.Value(c.slots[0])
		if math.IsNaN(v) {
			return -1
		}
		return c.gridPosition(v)
	case KindIntervals:
		v := x.Value(c.slots[0])
		if math.IsNaN(v) {
			return -1
		}
		p := c.gridPosition(v)
		switch {
		case p == 0:
			return 0
		case c.grid[p-1] == v:
			return 2*(p-1) + 1
		}
		return 2*(p-1) + 2
	case KindTable:
		v := x.Value(c.slots[0])
		p := position(c.sorted, v)
		if p == 0 || c.sorted[p-1] != v {
			return -1
		}
		return int(c.perm[p-1])
	case KindStumps:
		for _, s := range c.slots {
			if math.IsNaN(x.Value(s)) {
				return -1
			}
		}
		return 0
	case KindConjunctions:
		p := 0
		for v, s := range c.slots {
			switch x.Value(s) {
			case 0:
			case 1:
				p |= 1 << v
			default:
				return -1
			}
		}
		return p
	}
	panic("experts: unknown class kind " + c.kind)
}

// Labels overwrites dst with the hypotheses that say 1 on x and reports
// whether x is in the domain; outside it dst is left empty. dst must have
// been made by NewSet. Labels does not retain x and does not allocate.
func (c *Class) Labels(dst Set, x online.Vector) bool {
	p := c.point(x)
	if p < 0 {
		clear(dst)
		return false
	}
	if c.kind == KindStumps { // p is 0: the features' positions say it all
		clear(dst)
		for f, s := range c.slots {
			c.stumpLabels(dst, f, c.gridPosition(x.Value(s)))
		}
		return true
	}
	c.column(dst, p)
	return true
}

// intervalLabels overwrites dst with the intervals saying 1 on effective
// point p, computed rather than tabled (O(k + |H|/64) word operations):
// point 2m+1 is a_m itself, where [a_i, a_j] with i ≤ m ≤ j says 1; point
// 2m+2 (m < k-1) lies strictly between a_m and a_{m+1}, where i ≤ m <
// m+1 ≤ j says 1; points 0 and 2k are outside the grid (all 0).
func (c *Class) intervalLabels(dst Set, p int) {
	clear(dst)
	k := c.spec.Points
	if p == 0 || p == 2*k {
		return
	}
	m, j := (p-1)/2, (p-1)/2
	if p%2 == 0 {
		j = m + 1
	}
	for i := 0; i <= m; i++ {
		dst.setRange(intervalIndex(i, j, k), intervalIndex(i, k-1, k)+1)
	}
}

// stumpLabels adds to dst the stumps of feature f that say 1 when the
// feature's value has q grid values at or below it. Stump 2fk+i is
// 1[x_f ≥ a_i], stump 2fk+k+i is 1[x_f < a_i].
func (c *Class) stumpLabels(dst Set, f, q int) {
	k := c.spec.Points
	base := 2 * f * k
	dst.setRange(base, base+q)
	dst.setRange(base+k+q, base+2*k)
}

// numPoints returns the size of the effective domain, -1 when it is too
// large to enumerate (stumps over many features).
func (c *Class) numPoints() int { return c.np }

// column overwrites dst with the label Set of effective point p.
func (c *Class) column(dst Set, p int) {
	switch c.kind {
	case KindThresholds:
		clear(dst)
		dst.setRange(0, p)
	case KindIntervals:
		c.intervalLabels(dst, p)
	case KindStumps:
		clear(dst)
		k := c.spec.Points
		for f := range c.slots {
			c.stumpLabels(dst, f, p%(k+1))
			p /= k + 1
		}
	default:
		copy(dst, c.col(p))
	}
}

// pointValues returns, per feature of the class (in spec order), values of
// an event that lands on effective point p.
func (c *Class) pointValues(p int) []float64 {
	gridRep := func(q int) float64 {
		if q == 0 {
			return c.grid[0] - 1
		}
		return c.grid[q-1]
	}
	switch c.kind {
	case KindThresholds:
		return []float64{gridRep(p)}
	case KindIntervals:
		k := len(c.grid)
		switch {
		case p == 0:
			return []float64{c.grid[0] - 1}
		case p%2 == 1:
			return []float64{c.grid[(p-1)/2]}
		case p == 2*k:
			return []float64{c.grid[k-1] + 1}
		}
		m := (p - 2) / 2
		return []float64{(c.grid[m] + c.grid[m+1]) / 2}
	case KindTable:
		return []float64{c.spec.Domain[p]}
	case KindStumps:
		k := c.spec.Points
		out := make([]float64, len(c.slots))
		for f := range out {
			out[f] = gridRep(p % (k + 1))
			p /= k + 1
		}
		return out
	case KindConjunctions:
		out := make([]float64, len(c.slots))
		for v := range out {
			out[v] = float64(p >> v & 1)
		}
		return out
	}
	return nil
}

// pointVector returns a canonical event vector that lands on effective
// domain point p (0 ≤ p < number of points): what a test or an adversary
// presents to reach that point. It allocates.
func (c *Class) pointVector(p int) online.Vector {
	return c.vector(c.pointValues(p))
}

// vector returns the canonical event vector with c's features (in spec
// order) equal to vals: their slots in increasing order, a slot two
// features share holding the last one's value, zeros left out. It
// allocates.
func (c *Class) vector(vals []float64) online.Vector {
	type kv struct {
		i uint32
		v float64
	}
	var e []kv
	for f, s := range c.slots {
		if j := slices.IndexFunc(e, func(a kv) bool { return a.i == s }); j >= 0 {
			e[j].v = vals[f]
			continue
		}
		e = append(e, kv{s, vals[f]})
	}
	slices.SortFunc(e, func(a, b kv) int { return int(int64(a.i) - int64(b.i)) })
	var x online.Vector
	for _, a := range e {
		if a.v != 0 {
			x.Idx = append(x.Idx, a.i)
			x.Val = append(x.Val, a.v)
		}
	}
	return x
}

// describe names the class in errors: kind, feature(s), grid and |H|.
func (c *Class) describe() string {
	s := c.spec
	switch c.kind {
	case KindThresholds, KindIntervals:
		return fmt.Sprintf("%s on %q over %d points (%d hypotheses)", c.kind, s.Feature, s.Points, c.n)
	case KindTable:
		return fmt.Sprintf("table on %q (%d hypotheses × %d domain values)", s.Feature, c.n, len(s.Domain))
	case KindStumps:
		return fmt.Sprintf("stumps on %q over %d points (%d hypotheses)", s.Features, s.Points, c.n)
	}
	return fmt.Sprintf("%s on %q (%d hypotheses)", c.kind, s.Features, c.n)
}
