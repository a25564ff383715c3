package elfimage

import "sync"

// answerSlots is the number of answers an Image remembers per query kind
// ([Image.Procedure], [Image.PositionAt]).
const answerSlots = 256

// answerCache remembers recent answers of Procedure and PositionAt, so
// that the pcs a runtime asks about again and again (the same frames in
// backtraces and profiles) are answered without bisecting the procedure
// table, decoding strings or running a line sequence. It is two-way
// set-associative by a hash of the address: an answer goes into the free
// or the older of its set's two slots. Only
// successful answers are kept; answers are immutable Go values (no slice
// of the mapped file), so they stay valid after Close. The arrays are
// allocated on the first answer of their kind (2 KiB and 8 KiB).
type answerCache struct {
	mu    sync.Mutex
	procs *[answerSlots]*Procedure // hit: Start <= addr < Start+Size
	pos   *[answerSlots]posAnswer
	// older has bit i set when slot 2i+1 of procs (bit i+128: of pos)
	// holds the older answer of its set.
	older [answerSlots / 32]uint64
}

// victim returns which slot of the set at 2*set to fill (the empty one,
// else the older) and marks the other as the older; base is 0 for procs,
// answerSlots/2 for pos.
func (c *answerCache) victim(set, base int, empty0, empty1 bool) int {
	bit := set + base
	w, m := bit/64, uint64(1)<<(bit%64)
	i := 0
	if !empty0 && (empty1 || c.older[w]&m != 0) {
		i = 1
	}
	if i == 0 {
		c.older[w] |= m // slot 1 is now the older
	} else {
		c.older[w] &^= m
	}
	return 2*set + i
}

type posAnswer struct {
	ok   bool
	addr uint64
	pos  Position
}

// answerSet is the set of addr, slots 2*set and 2*set+1: Fibonacci
// hashing, so that addresses at regular strides spread over the sets.
func answerSet(addr uint64) int { return int((addr * 0x9e3779b97f4a7c15) >> 57) }

// procedure returns a remembered Procedure covering addr.
func (c *answerCache) procedure(addr uint64) (Procedure, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.procs == nil {
		return Procedure{}, false
	}
	set := answerSet(addr)
	for _, p := range c.procs[2*set : 2*set+2] {
		if p != nil && addr >= p.Start && addr-p.Start < p.Size {
			return *p, true
		}
	}
	return Procedure{}, false
}

// putProcedure remembers p as the answer for addr.
func (c *answerCache) putProcedure(addr uint64, p Procedure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.procs == nil {
		c.procs = new([answerSlots]*Procedure)
	}
	set := answerSet(addr)
	c.procs[c.victim(set, 0, c.procs[2*set] == nil, c.procs[2*set+1] == nil)] = &p
}

// position returns the remembered Position of addr.
func (c *answerCache) position(addr uint64) (Position, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pos == nil {
		return Position{}, false
	}
	set := answerSet(addr)
	for i := 2 * set; i < 2*set+2; i++ {
		if a := &c.pos[i]; a.ok && a.addr == addr {
			return a.pos, true
		}
	}
	return Position{}, false
}

// putPosition remembers p as the answer for addr.
func (c *answerCache) putPosition(addr uint64, p Position) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pos == nil {
		c.pos = new([answerSlots]posAnswer)
	}
	set := answerSet(addr)
	c.pos[c.victim(set, answerSlots/2, !c.pos[2*set].ok, !c.pos[2*set+1].ok)] = posAnswer{ok: true, addr: addr, pos: p}
}
