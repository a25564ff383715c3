package elfimage

import "sync"

// answerSlots is the number of answers an Image remembers per query kind
// ([Image.Procedure], [Image.PositionAt]).
const answerSlots = 256

// answerChunk is how many slots of one kind are allocated together.
const answerChunk = 32

// answerCache remembers recent answers of Procedure and PositionAt, so
// that the pcs a runtime asks about again and again (the same frames in
// backtraces and profiles) are answered without bisecting the procedure
// table, decoding strings or running a line sequence. It is two-way
// set-associative by a hash of the address: an answer goes into the free
// or the older of its set's two slots. Only
// successful answers are kept; answers are immutable Go values (no slice
// of the mapped file), so they stay valid after Close. The slots are
// allocated in chunks of answerChunk (16 sets) on the first answer that
// falls in each (256 bytes and 1.5 KiB), so that a first query does not
// pay for zeroing the whole cache (2 KiB and 12 KiB); the first position
// answered is kept in pos1, without a chunk, until a second comes and both
// go to their slots (the same slots as if the chunks had been there).
type answerCache struct {
	mu    sync.Mutex
	procs [answerSlots / answerChunk]*[answerChunk]*Procedure // hit: Start <= addr < Start+Size
	pos   [answerSlots / answerChunk]*[answerChunk]posAnswer
	pos1  posAnswer // the only position answered, until a second (posN)
	posN  bool      // a second position was answered: pos holds them all
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
	set := answerSet(addr)
	ch := c.procs[2*set/answerChunk]
	if ch == nil {
		return Procedure{}, false
	}
	i := 2 * set % answerChunk
	for _, p := range ch[i : i+2] {
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
	set := answerSet(addr)
	ch := c.procs[2*set/answerChunk]
	if ch == nil {
		ch = new([answerChunk]*Procedure)
		c.procs[2*set/answerChunk] = ch
	}
	i := 2 * set % answerChunk
	ch[c.victim(set, 0, ch[i] == nil, ch[i+1] == nil)%answerChunk] = &p
}

// position returns the remembered Position of addr.
func (c *answerCache) position(addr uint64) (Position, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.posN {
		if c.pos1.ok && c.pos1.addr == addr {
			return c.pos1.pos, true
		}
		return Position{}, false
	}
	set := answerSet(addr)
	ch := c.pos[2*set/answerChunk]
	if ch == nil {
		return Position{}, false
	}
	for i := 2 * set % answerChunk; i < 2*set%answerChunk+2; i++ {
		if a := &ch[i]; a.ok && a.addr == addr {
			return a.pos, true
		}
	}
	return Position{}, false
}

// putPosition remembers p as the answer for addr.
func (c *answerCache) putPosition(addr uint64, p Position) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.posN {
		if !c.pos1.ok || c.pos1.addr == addr {
			c.pos1 = posAnswer{ok: true, addr: addr, pos: p}
			return
		}
		c.posN = true
		c.putPositionSlot(c.pos1.addr, c.pos1.pos)
		c.pos1 = posAnswer{}
	}
	c.putPositionSlot(addr, p)
}

// putPositionSlot puts p for addr in its set's slot (c.mu held).
func (c *answerCache) putPositionSlot(addr uint64, p Position) {
	set := answerSet(addr)
	ch := c.pos[2*set/answerChunk]
	if ch == nil {
		ch = new([answerChunk]posAnswer)
		c.pos[2*set/answerChunk] = ch
	}
	i := 2 * set % answerChunk
	ch[c.victim(set, answerSlots/2, !ch[i].ok, !ch[i+1].ok)%answerChunk] = posAnswer{ok: true, addr: addr, pos: p}
}
