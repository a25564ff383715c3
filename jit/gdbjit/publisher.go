package gdbjit

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Errors of [Publisher], matched with errors.Is.
var (
	// ErrClosed: the Publisher was closed.
	ErrClosed = errors.New("gdbjit: publisher closed")
	// ErrNotPublished: Remove was given an address at which no procedure
	// of the Publisher starts (never added, or already removed).
	ErrNotPublished = errors.New("gdbjit: no published procedure at address")
)

// PublisherOptions configures a [Publisher]. The zero value selects every
// default.
type PublisherOptions struct {
	// Delay is the longest time a procedure waits between Add and the
	// start of the flush that publishes it: the first Add into an empty
	// pending batch arms a timer of Delay. Default 20 ms.
	Delay time.Duration
	// MaxPending starts a flush at once (in the background) when this many
	// procedures are pending. Default 1024.
	MaxPending int
	// Fanout is the merge factor of repacking (at least 2): objects are
	// grouped by level, floor(log_Fanout(procedures)), and Fanout objects
	// of one level are merged into one. Larger values re-register each
	// procedure fewer times (at most once per level) but keep more
	// objects (up to Fanout-1 per level). Values below 2 select the
	// default, 4.
	Fanout int
	// MaxObjectProcs caps the procedures a repack merges into one object
	// (a merge that would exceed it is not made), which bounds the time
	// of the largest single registration (gdb stops the whole process
	// while it reads a symbol file) and so the visibility latency.
	// Default 1024.
	MaxObjectProcs int
	// OnPublish, when not nil, is called on the flushing goroutine each
	// time a flush has made n more procedures visible: the oldest n added
	// and not yet published, in Add order (removed ones included in the
	// count). It is called after the debugger notifications returned, so
	// a debugger that is attached has read the symbol file by then. It
	// must not call the Publisher's methods.
	OnPublish func(n int)
}

// Publisher publishes procedures to a debugger through the GDB JIT
// interface one at a time, as a JIT produces them, at a cost per
// procedure that stays bounded however many are published. See the
// package documentation, section "Publisher", for the design and its
// guarantees. Its methods may be called from any goroutine.
type Publisher struct {
	opt PublisherOptions

	// flushMu serialises flushes and guards objs and sections.
	flushMu sync.Mutex
	objs    []*object      // registered objects, oldest first
	secs    []secRange     // .text ranges of objs, sorted by lo
	stats   PublisherStats // guarded by mu

	// mu guards everything below and the dead and obj fields of records
	// and objects. It is never held during a notification.
	mu        sync.Mutex
	pending   []*procRec          // added, not yet published, in Add order
	index     map[uint64]*procRec // live (added, not removed) by Addr
	dirty     bool                // an object holds removed procedures
	scheduled bool                // timer armed or flush requested
	urgent    bool                // timer armed to fire at once
	closed    bool
	err       error // first error of a background flush
	timer     *time.Timer
}

// procRec is one added procedure.
type procRec struct {
	p    Proc
	obj  *object // the object it is registered in; nil while pending
	dead bool    // removed
}

// object is one registered symbol file and the procedures in it, sorted
// by Addr; dead counts removed ones.
type object struct {
	e      *Entry
	procs  []*procRec
	dead   int
	ranges [][2]uint64 // .text section ranges
}

type secRange struct {
	lo, hi uint64
	obj    *object
}

// PublisherStats are counters of a [Publisher].
type PublisherStats struct {
	Procs           int // live procedures: added and not removed
	Pending         int // added procedures not yet published
	Objects         int // registered symbol files
	Flushes         int // flushes that did work
	Registrations   int // symbol files registered (debugger notifications)
	Unregistrations int // symbol files unregistered (debugger notifications)
	// FlushTime is the total wall time of flushes and MaxFlush the
	// longest one (with a debugger attached, mostly the debugger reading
	// symbol files while the process is stopped).
	FlushTime, MaxFlush time.Duration
}

// NewPublisher returns a Publisher with no procedures. Cost: one timer.
func NewPublisher(opt PublisherOptions) *Publisher {
	if opt.Delay <= 0 {
		opt.Delay = 20 * time.Millisecond
	}
	if opt.MaxPending <= 0 {
		opt.MaxPending = 1024
	}
	if opt.Fanout < 2 {
		opt.Fanout = 4
	}
	if opt.MaxObjectProcs <= 0 {
		opt.MaxObjectProcs = 1024
	}
	p := &Publisher{opt: opt, index: map[uint64]*procRec{}}
	p.timer = time.AfterFunc(time.Hour, p.backgroundFlush)
	p.timer.Stop()
	return p
}

// Add queues procs for publication and returns; a flush (Delay after the
// first pending Add, at once when MaxPending are pending, or [Publisher.Flush])
// registers them. Add never waits for a debugger: it only takes the
// Publisher's lock, which no notification holds.
//
// Each procedure is checked as [Symfile] checks it (its CFI included, so
// that no flush fails on it), and its Addr must not be the Addr of a live
// (added, not removed) procedure; procedures whose ranges overlap live
// ones in other ways are detected at the flush, left out, and reported by
// the next Flush or Close. Add keeps deep copies of procs (Lines, CFI and
// CIE, with their expressions).
//
// Errors: wrapping [ErrInvalidProc] (nothing of procs is added then), or
// [ErrClosed]. Cost: O(len(procs)) amortized (an allocation per procedure
// plus its Lines and CFI, and an encoding of its FDE to check it),
// independent of how many procedures are published; the flushes' work,
// amortized per procedure, is O(log MaxObjectProcs) re-encodings of it
// into symbol files.
func (p *Publisher) Add(procs ...Proc) error {
	recs := make([]procRec, len(procs))
	for i := range procs {
		if err := procs[i].validate(); err != nil {
			return err
		}
		recs[i].p = procs[i].clone()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	for i := range recs {
		if q, ok := p.index[recs[i].p.Addr]; ok {
			return fmt.Errorf("%w: %q at %#x: %q is published there", ErrInvalidProc, recs[i].p.Name, recs[i].p.Addr, q.p.Name)
		}
		for j := range i {
			if recs[j].p.Addr == recs[i].p.Addr {
				return fmt.Errorf("%w: %q and %q both at %#x", ErrInvalidProc, recs[j].p.Name, recs[i].p.Name, recs[i].p.Addr)
			}
		}
	}
	for i := range recs {
		r := &recs[i]
		p.index[r.p.Addr] = r
		p.pending = append(p.pending, r)
	}
	p.scheduleLocked(len(p.pending) >= p.opt.MaxPending)
	return nil
}

// scheduleLocked arms the flush timer (Delay, or 0 when now is set); mu
// must be held.
func (p *Publisher) scheduleLocked(now bool) {
	if now {
		if !p.urgent {
			p.scheduled, p.urgent = true, true
			p.timer.Reset(0)
		}
		return
	}
	if !p.scheduled {
		p.scheduled = true
		p.timer.Reset(p.opt.Delay)
	}
}

// Remove unpublishes the procedure that starts at addr (its code is being
// freed). The next flush drops it: it rebuilds the object that holds it
// without it (or unregisters the object when nothing is left) and the
// debugger forgets the symbol then. Until that flush, a debugger may still
// show the procedure: free its code only after a flush that started after
// Remove returned (call [Publisher.Flush] to force one), as the GDB
// manual's order of unregistering asks. The address may be added again
// at once.
//
// Errors: [ErrNotPublished] wrapped with addr, or [ErrClosed]. Cost: O(1).
func (p *Publisher) Remove(addr uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	r, ok := p.index[addr]
	if !ok {
		return fmt.Errorf("%w %#x", ErrNotPublished, addr)
	}
	delete(p.index, addr)
	r.dead = true
	if r.obj != nil {
		r.obj.dead++
		p.dirty = true
		p.scheduleLocked(false)
	}
	return nil
}

// Flush publishes every pending procedure and drops every removed one
// now: when it returns, a debugger that is attached has read every
// procedure added before the call and forgotten every one removed before
// it. It then repacks the objects (see the package documentation).
//
// Errors: the first error of a flush since the last Flush (including
// background flushes): procedures left out because they overlap others
// (wrapping [ErrInvalidProc]) or a registration error; or [ErrClosed].
// Cost: with nothing pending or removed, a lock; otherwise building and
// registering one symbol file for the pending procedures, one per object
// that lost procedures, and the repack's merges.
func (p *Publisher) Flush() error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.mu.Unlock()
	err := p.flushLocked()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		err = p.err
	}
	p.err = nil
	return err
}

// backgroundFlush is the timer's function.
func (p *Publisher) backgroundFlush() {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return
	}
	if err := p.flushLocked(); err != nil {
		p.mu.Lock()
		if p.err == nil {
			p.err = err
		}
		p.mu.Unlock()
	}
}

// Close unregisters every object of the Publisher (a debugger forgets all
// its procedures) and drops pending procedures; later calls of its
// methods return [ErrClosed]. It waits for a flush in progress.
//
// Errors: the first unregistration error, else the first unreported
// flush error. Cost: one notification per registered object.
func (p *Publisher) Close() error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	p.timer.Stop()
	p.pending = nil
	p.index = nil
	err := p.err
	p.mu.Unlock()
	for _, o := range p.objs {
		if uerr := o.e.Unregister(); uerr != nil && err == nil {
			err = uerr
		}
	}
	p.mu.Lock()
	p.stats.Unregistrations += len(p.objs)
	p.mu.Unlock()
	p.objs, p.secs = nil, nil
	return err
}

// Stats returns the Publisher's counters. Cost: one lock.
func (p *Publisher) Stats() PublisherStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Procs = len(p.index)
	s.Pending = len(p.pending)
	return s
}

// build is one object to make in a flush: the live procedures of the
// objects in from, plus extra.
type build struct {
	from  []*object
	extra []*procRec
	at    int // position in objs of the result; -1: append
	procs []*procRec
	obj   *object
}

// flushLocked runs one flush; flushMu must be held.
//
// Step 1 (publish) builds one object for the pending procedures and
// rebuilds every object that lost procedures or whose .text range a
// pending procedure falls into; step 2 (repack) merges neighbouring
// objects geometrically. Each step registers its new objects before it
// unregisters the ones they replace.
func (p *Publisher) flushLocked() error {
	p.mu.Lock()
	batch := p.pending
	p.pending = nil
	p.scheduled, p.urgent = false, false
	dirty := p.dirty
	p.dirty = false
	rebuild := map[*object]bool{}
	if dirty {
		for _, o := range p.objs {
			if o.dead > 0 {
				rebuild[o] = true
			}
		}
	}
	p.mu.Unlock()
	if len(batch) == 0 && len(rebuild) == 0 {
		return nil
	}
	t0 := time.Now()
	defer func() {
		d := time.Since(t0)
		p.mu.Lock()
		p.stats.FlushTime += d
		p.stats.MaxFlush = max(p.stats.MaxFlush, d)
		p.mu.Unlock()
	}()
	// The batch goes out in chunks of at most MaxObjectProcs, oldest
	// first, each visible as soon as its notification returns.
	var err error
	for start := 0; start == 0 || start < len(batch); {
		end := min(start+p.opt.MaxObjectProcs, len(batch))
		var live []*procRec
		p.mu.Lock()
		for _, r := range batch[start:end] {
			if !r.dead {
				live = append(live, r)
			}
		}
		p.mu.Unlock()
		for _, r := range live {
			if o := p.sectionAt(r.p.Addr, r.p.Addr+r.p.Size); o != nil {
				rebuild[o] = true
			}
		}
		var builds []*build
		for i, o := range p.objs {
			if rebuild[o] {
				builds = append(builds, &build{from: []*object{o}, at: i})
			}
		}
		clear(rebuild)
		if len(live) > 0 {
			builds = append(builds, &build{extra: live, at: -1})
		}
		if err = p.apply(builds); err != nil {
			// Nothing of this chunk was published: it and the rest go
			// back to the front of the pending procedures.
			p.mu.Lock()
			p.pending = append(slices.Clone(batch[start:]), p.pending...)
			p.scheduleLocked(false)
			p.mu.Unlock()
			break
		}
		if end > start && p.opt.OnPublish != nil {
			p.opt.OnPublish(end - start)
		}
		start = end
		if start == 0 {
			break // nothing pending, rebuilds only
		}
	}
	p.mu.Lock()
	p.stats.Flushes++
	p.mu.Unlock()
	if err != nil {
		return err
	}
	return p.repack()
}

// sectionAt returns the object one of whose .text ranges overlaps
// [lo, hi), or nil. Cost: O(log sections).
func (p *Publisher) sectionAt(lo, hi uint64) *object {
	i, _ := slices.BinarySearchFunc(p.secs, lo, func(s secRange, a uint64) int {
		if s.hi <= a {
			return -1
		}
		return 1
	})
	// secs[i] is the first range that ends after lo.
	if i < len(p.secs) && p.secs[i].lo < hi {
		return p.secs[i].obj
	}
	return nil
}

// level is the size class of an object of n procedures: floor(log_r(n)).
func level(n, r int) int {
	l := 0
	for n >= r {
		n /= r
		l++
	}
	return l
}

// repack merges objects by size class, like a tiered log-structured
// merge: when Fanout objects share a level (floor(log_Fanout(procedures)))
// the Fanout smallest of them are merged into one, of a higher level,
// unless that would exceed MaxObjectProcs; repeated until no level can be
// merged. Every level below the cap then holds fewer than Fanout objects,
// and a procedure is re-registered at most once per level it climbs.
func (p *Publisher) repack() error {
	r, maxN := p.opt.Fanout, p.opt.MaxObjectProcs
	type group struct {
		objs []*object
		n    int
	}
	var groups []group
	for _, o := range p.objs {
		groups = append(groups, group{objs: []*object{o}, n: len(o.procs)})
	}
	merged := false
	for again := true; again; {
		again = false
		byLevel := map[int][]int{}
		for i, g := range groups {
			byLevel[level(g.n, r)] = append(byLevel[level(g.n, r)], i)
		}
		for _, idx := range byLevel {
			if len(idx) < r {
				continue
			}
			slices.SortFunc(idx, func(a, b int) int { return groups[a].n - groups[b].n })
			idx = idx[:r]
			sum := 0
			for _, i := range idx {
				sum += groups[i].n
			}
			if sum > maxN {
				continue
			}
			var m group
			for _, i := range idx {
				m.objs = append(m.objs, groups[i].objs...)
				m.n += groups[i].n
			}
			slices.Sort(idx)
			for k := len(idx) - 1; k >= 0; k-- {
				groups = slices.Delete(groups, idx[k], idx[k]+1)
			}
			groups = append(groups, m)
			merged, again = true, true
			break
		}
	}
	if !merged {
		return nil
	}
	// One merge at a time, and none while procedures wait: a merge is
	// the longest registration (gdb reads up to MaxObjectProcs
	// procedures while the process is stopped), so yielding to pending
	// procedures bounds their wait by one merge plus Delay. The merges
	// left over are found again by the next flush's repack. At least one
	// merge is made per flush, so that merging keeps pace with a JIT that
	// never stops adding.
	done := 0
	for _, g := range groups {
		if len(g.objs) < 2 {
			continue
		}
		if done > 0 && p.hasPending() {
			return nil
		}
		done++
		if err := p.apply([]*build{{from: g.objs, at: slices.Index(p.objs, g.objs[0])}}); err != nil {
			return err
		}
	}
	return nil
}

// hasPending reports whether procedures wait for publication.
func (p *Publisher) hasPending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending) > 0
}

// apply makes the objects of builds: it gathers their live procedures,
// splits each object's procedures into .text groups that no other
// object's procedures or ranges fall between, builds and registers each
// symbol file, then unregisters the objects they replace and updates objs
// and secs. flushMu must be held.
func (p *Publisher) apply(builds []*build) error {
	replaced := map[*object]bool{}
	p.mu.Lock()
	for _, b := range builds {
		for _, o := range b.from {
			replaced[o] = true
			for _, r := range o.procs {
				if !r.dead {
					b.procs = append(b.procs, r)
				}
			}
		}
		for _, r := range b.extra {
			if !r.dead {
				b.procs = append(b.procs, r)
			}
		}
	}
	p.mu.Unlock()

	// Every procedure being built and every range of the objects that
	// stay, sorted by address: a group of an object continues only while
	// the next item in address order is its own.
	type item struct {
		lo, hi uint64
		b      int // index in builds, or -1 for a range that stays
		r      *procRec
	}
	var items []item
	for bi, b := range builds {
		for _, r := range b.procs {
			items = append(items, item{r.p.Addr, r.p.Addr + r.p.Size, bi, r})
		}
	}
	for _, s := range p.secs {
		if !replaced[s.obj] {
			items = append(items, item{s.lo, s.hi, -1, nil})
		}
	}
	slices.SortFunc(items, func(a, b item) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	// Items never overlap unless a JIT added overlapping procedures:
	// then a procedure not yet published is left out rather than one
	// that is (a pending one against another, the later in address
	// order). Ranges that stay hold published procedures.
	var firstErr error
	bad := map[*procRec]bool{} // procedures left out
	markBad := func(r *procRec) {
		bad[r] = true
		if firstErr == nil {
			firstErr = fmt.Errorf("%w: %q [%#x, %#x) overlaps another procedure; not published",
				ErrInvalidProc, r.p.Name, r.p.Addr, r.p.Addr+r.p.Size)
		}
	}
	kept := items[:0]
	for _, it := range items {
		for len(kept) > 0 && it.lo < kept[len(kept)-1].hi {
			k := kept[len(kept)-1]
			if it.r != nil && (k.r == nil || k.r.obj != nil || it.r.obj == nil) {
				markBad(it.r)
				it.r = nil // marks it dropped
				break
			}
			markBad(k.r)
			kept = kept[:len(kept)-1]
		}
		if it.r != nil || it.b < 0 {
			kept = append(kept, it)
		}
	}
	groups := make([][][]Proc, len(builds))
	owned := make([][]*procRec, len(builds))
	last := -2
	for _, it := range kept {
		if it.b >= 0 {
			if last != it.b {
				groups[it.b] = append(groups[it.b], nil)
			}
			g := &groups[it.b][len(groups[it.b])-1]
			*g = append(*g, it.r.p)
			owned[it.b] = append(owned[it.b], it.r)
		}
		last = it.b
	}
	if len(bad) > 0 {
		p.mu.Lock()
		for r := range bad {
			if !r.dead {
				r.dead = true
				if p.index[r.p.Addr] == r {
					delete(p.index, r.p.Addr)
				}
			}
		}
		p.mu.Unlock()
	}

	// Register the new objects, then unregister the ones they replace:
	// in between a debugger knows every procedure, some twice, never none,
	// so a breakpoint on a procedure stays inserted throughout.
	var made []*object
	for bi, b := range builds {
		if len(owned[bi]) == 0 {
			continue
		}
		sym, err := symfileGroups(groups[bi])
		if err == nil {
			var e *Entry
			if e, err = Register(sym); err == nil {
				o := &object{e: e, procs: owned[bi]}
				for _, g := range groups[bi] {
					var hi uint64
					for _, q := range g {
						hi = max(hi, q.Addr+q.Size)
					}
					o.ranges = append(o.ranges, [2]uint64{g[0].Addr, hi})
				}
				b.obj = o
				made = append(made, o)
				continue
			}
		}
		// Undo: the replaced objects stay (the caller re-queues new
		// procedures).
		for _, o := range made {
			o.e.Unregister()
		}
		p.mu.Lock()
		p.stats.Registrations += len(made)
		p.stats.Unregistrations += len(made)
		p.mu.Unlock()
		return fmt.Errorf("gdbjit: publishing: %w", err)
	}
	var uerr error
	for o := range replaced {
		if err := o.e.Unregister(); err != nil && uerr == nil {
			uerr = err
		}
	}

	// The new list of objects: each result at the place of its first
	// replaced object, new ones at the end.
	var objs []*object
	at := map[int]*object{}
	var tail []*object
	for _, b := range builds {
		if b.obj == nil {
			continue
		}
		if b.at >= 0 {
			at[b.at] = b.obj
		} else {
			tail = append(tail, b.obj)
		}
	}
	for i, o := range p.objs {
		if n, ok := at[i]; ok {
			objs = append(objs, n)
		} else if !replaced[o] {
			objs = append(objs, o)
		}
	}
	p.objs = append(objs, tail...)
	p.secs = p.secs[:0]
	for _, o := range p.objs {
		for _, r := range o.ranges {
			p.secs = append(p.secs, secRange{r[0], r[1], o})
		}
	}
	slices.SortFunc(p.secs, func(a, b secRange) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})

	p.mu.Lock()
	for _, o := range made {
		for _, r := range o.procs {
			r.obj = o
			if r.dead {
				o.dead++
			}
		}
		if o.dead > 0 {
			p.dirty = true
			p.scheduleLocked(false)
		}
	}
	p.stats.Registrations += len(made)
	p.stats.Unregistrations += len(replaced)
	p.stats.Objects = len(p.objs)
	p.mu.Unlock()
	if firstErr == nil {
		firstErr = uerr
	}
	return firstErr
}
