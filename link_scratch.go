package elfimage

import (
	"runtime"
	"sync"

	"github.com/elfimage/elfimage/dwarf"
)

// scratch keeps a few large buffers of one link for the next link, as a
// sync.Pool does, and like it lets the garbage collector have them: a
// buffer not taken again is dropped at the second collection after its
// put. Unlike a sync.Pool, whose last put value sits in a slot of the
// processor (P) that put it and is found only by a goroutine on that P, a
// scratch hands its buffers to any goroutine: the link's helper
// goroutines run on whichever P is free, and with a sync.Pool about half
// of the links found nothing and allocated (and zeroed) the buffers
// again, 1.9 MB a link of 10,000 procedures. Safe for concurrent use.
type scratch[T any] struct {
	mu   sync.Mutex
	cur  []T // put since the last collection
	prev []T // put before it: dropped at the next collection
}

// scratchKeep is the number of buffers a scratch keeps (the three
// batches of a pipelined link).
const scratchKeep = 4

// get returns a kept buffer, the most recently put first, or ok false.
func (s *scratch[T]) get() (v T, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range []*[]T{&s.cur, &s.prev} {
		if n := len(*l); n > 0 {
			v = (*l)[n-1]
			var zero T
			(*l)[n-1] = zero
			*l = (*l)[:n-1]
			return v, true
		}
	}
	return v, false
}

// put keeps v for a later get, unless scratchKeep buffers are kept
// already.
func (s *scratch[T]) put(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cur)+len(s.prev) < scratchKeep {
		s.cur = append(s.cur, v)
	}
}

// collected ages the kept buffers by one collection.
func (s *scratch[T]) collected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.prev)
	s.prev, s.cur = s.cur, s.prev[:0]
}

// scratches is every scratch of the package, aged by gcTick.
var scratches = []interface{ collected() }{&rowsScratch, &batchScratch, &procsScratch, &symsScratch, &strScratch}

// symsScratch and strScratch keep the symbol map and the .debug_str
// table of an image's link (cleared: no name of the module stays
// referenced) for the next link, which then neither grows nor allocates
// them (0.6 and 0.5 MB for 10,000 procedures).
var (
	symsScratch scratch[keptSyms]
	strScratch  scratch[*dwarf.StrTab]
)

// keptSyms is a cleared symbol map and the number of names it was made
// for.
type keptSyms struct {
	m    map[string]symbol
	room int
}

// newSyms returns an empty symbol map for n names: a kept one made for
// at least as many, or a new one (l.symsRoom says which size).
func (l *linker) newSyms(n int) map[string]symbol {
	if k, ok := symsScratch.get(); ok && k.room >= n {
		l.symsRoom = k.room
		return k.m
	}
	l.symsRoom = n
	return make(map[string]symbol, n)
}

// newDebugStr returns an empty string table holding the empty string at
// offset 0, as dwarf.NewStrTab does.
func newDebugStr() *dwarf.StrTab {
	t, ok := strScratch.get()
	if !ok {
		return dwarf.NewStrTab()
	}
	t.Add("")
	return t
}

// release keeps the symbol map and .debug_str table of a link that
// succeeded for the next link: Link calls it once the output holds a copy
// of every section and nothing reads them again.
func (l *linker) release() {
	clear(l.syms)
	symsScratch.put(keptSyms{l.syms, l.symsRoom})
	l.syms = nil
	if l.str != nil {
		l.str.Reset()
		strScratch.put(l.str)
		l.str = nil
	}
}

// gcSentinel is an object made only to become garbage: its cleanup
// runs after the collection that finds it unreachable. It holds a
// pointer so that it is not a tiny allocation, whose cleanups may never
// run.
type gcSentinel struct{ _ *byte }

// armGCTick ages the scratches after the next garbage collection, and
// then again after each one (the cleanup re-arms itself).
func armGCTick() {
	runtime.AddCleanup(new(gcSentinel), func(struct{}) {
		for _, s := range scratches {
			s.collected()
		}
		armGCTick()
	}, struct{}{})
}

func init() { armGCTick() }
