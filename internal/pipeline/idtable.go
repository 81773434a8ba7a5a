package pipeline

import "bytes"

// idTable maps the hash of an id to the first slot of its chain: an open
// addressing table with linear probing, cheaper than a Go map for the
// store's four or five operations per delayed event. Key 0 marks an empty
// place, so hashes are kept odd-free of it by idHash. It grows to keep at
// most half of its places used, and deletes by shifting back the entries
// after the deleted one, so that no tombstone slows it down.
type idTable struct {
	keys []uint64
	vals []int32
	n    int
}

// idHash maps a hash to a key of the table: never 0.
func idHash(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// place returns where key k is or would go.
func (t *idTable) place(k uint64) (int, bool) {
	mask := len(t.keys) - 1
	for i := int(k) & mask; ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return i, true
		case 0:
			return i, false
		}
	}
}

func (t *idTable) get(k uint64) (int32, bool) {
	if t.n == 0 {
		return 0, false
	}
	i, ok := t.place(k)
	return t.vals[i], ok
}

func (t *idTable) set(k uint64, v int32) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	i, ok := t.place(k)
	if !ok {
		t.keys[i] = k
		t.n++
	}
	t.vals[i] = v
}

func (t *idTable) grow() {
	keys, vals := t.keys, t.vals
	size := max(64, 2*len(keys))
	t.keys, t.vals, t.n = make([]uint64, size), make([]int32, size), 0
	for i, k := range keys {
		if k != 0 {
			t.set(k, vals[i])
		}
	}
}

func (t *idTable) del(k uint64) {
	if t.n == 0 {
		return
	}
	i, ok := t.place(k)
	if !ok {
		return
	}
	mask := len(t.keys) - 1
	for j := i; ; {
		j = (j + 1) & mask
		kj := t.keys[j]
		if kj == 0 {
			break
		}
		// The entry at j may move to i unless its own place lies
		// cyclically in (i, j].
		if home := int(kj) & mask; i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
			continue
		}
		t.keys[i], t.vals[i] = kj, t.vals[j]
		i = j
	}
	t.keys[i] = 0
	t.n--
}

// chainIndex finds numbered slots by their ids. tab maps the hash of an id
// to the first slot of that hash; next[i] links slot i to the next slot of
// the same hash (-1 at the end), and ids[i] and hashes[i] are slot i's id
// (its bytes reused from one use of the slot to the next) and hash. Ids
// are compared byte for byte, so colliding hashes only lengthen a chain.
type chainIndex struct {
	tab    idTable
	ids    [][]byte
	hashes []uint64
	next   []int32
	// held counts the bytes add allocated: ids, and each slot's entries
	// (Pipeline.Footprint).
	held int
}

// find returns the slot of id, of hash h (-1 when no slot has it), and the
// first slot of its hash (-1 when none).
func (c *chainIndex) find(id []byte, h uint64) (slot, first int32) {
	first, ok := c.tab.get(h)
	if !ok {
		return -1, -1
	}
	for i := first; i >= 0; i = c.next[i] {
		if bytes.Equal(c.ids[i], id) {
			return i, first
		}
	}
	return -1, first
}

// head returns the first slot of hash h, -1 when none.
func (c *chainIndex) head(h uint64) int32 {
	if i, ok := c.tab.get(h); ok {
		return i
	}
	return -1
}

// add gives slot i a copy of id, of hash h, and puts it before first, the
// first slot of that hash (-1 when none).
func (c *chainIndex) add(i int32, id []byte, h uint64, first int32) {
	for int(i) >= len(c.ids) {
		c.ids, c.hashes, c.next = append(c.ids, nil), append(c.hashes, 0), append(c.next, -1)
		c.held += 24 + 8 + 4 + 16 // the slot's id header, hash, next, and its table cell
	}
	if cap(c.ids[i]) < len(id) {
		// Room for ids twice as long as this one: ids that count
		// up would otherwise outgrow every reused slot's bytes in turn.
		c.held += 2*len(id) - cap(c.ids[i])
		c.ids[i] = make([]byte, 0, 2*len(id))
	}
	c.ids[i] = append(c.ids[i][:0], id...)
	c.hashes[i], c.next[i] = h, first
	c.tab.set(h, i)
}

// remove takes slot i out of the chain of its hash, whose first slot is
// first.
func (c *chainIndex) remove(i, first int32) {
	h, n := c.hashes[i], c.next[i]
	if first == i {
		if n < 0 {
			c.tab.del(h)
		} else {
			c.tab.set(h, n)
		}
		return
	}
	j := first
	for c.next[j] != i {
		j = c.next[j]
	}
	c.next[j] = n
}
