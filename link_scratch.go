package elfimage

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"

	"github.com/elfimage/elfimage/dwarf"
)

// scratch keeps a few large buffers of one link for the next link, as a
// sync.Pool does, and like it lets the garbage collector have them: a
// buffer not taken again is dropped once the second collection after its
// put has run. Unlike a sync.Pool, whose last put value sits in a slot of
// the processor (P) that put it and is found only by a goroutine on that
// P, a scratch hands its buffers to any goroutine: the link's helper
// goroutines run on whichever P is free, and with a sync.Pool about half
// of the links found nothing and allocated (and zeroed) the buffers
// again, 1.9 MB a link of 10,000 procedures. Safe for concurrent use.
type scratch[T any] struct {
	mu   sync.Mutex
	kept []kept[T] // in the order of their puts
}

// kept is a buffer and the number of collections begun before its put.
type kept[T any] struct {
	v     T
	cycle uint64
}

// scratchKeep is the number of buffers a scratch keeps (the three
// batches of a pipelined link).
const scratchKeep = 4

// get returns a kept buffer, the most recently put first, or ok false.
func (s *scratch[T]) get() (v T, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.kept)
	if n == 0 {
		return v, false
	}
	v = s.kept[n-1].v
	s.kept[n-1] = kept[T]{}
	s.kept = s.kept[:n-1]
	return v, true
}

// put keeps v for a later get, unless scratchKeep buffers are kept
// already.
func (s *scratch[T]) put(v T) {
	c := gcCycles()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.kept) < scratchKeep {
		s.kept = append(s.kept, kept[T]{v, c})
	}
}

// collected drops the buffers put before the last two collections, cycle
// being the number of collections begun so far.
func (s *scratch[T]) collected(cycle uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.kept {
		if cycle-k.cycle < 2 {
			s.kept[n] = k
			n++
		}
	}
	clear(s.kept[n:])
	s.kept = s.kept[:n]
}

// gcCycles returns the number of garbage collections begun (completed
// or under way) so far.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return gcTicks.Load() // not reported: count the cleanups instead
	}
	return s[0].Value.Uint64()
}

// gcTicks is the number of times armGCTick's cleanup ran.
var gcTicks atomic.Uint64

// scratches is every scratch of the package, aged by gcTick.
var scratches = []interface{ collected(cycle uint64) }{&rowsScratch, &batchScratch, &procsScratch, &symsScratch, &strScratch}

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

// armGCTick drops the scratches' old buffers after the next garbage
// collection, and then again after each one (the cleanup re-arms
// itself). A cleanup runs some time after its collection, perhaps after
// the next one began: the age of a buffer is counted in collections
// begun (gcCycles), so a late cleanup can keep a buffer longer, never
// drop one early.
func armGCTick() {
	runtime.AddCleanup(new(gcSentinel), func(struct{}) {
		gcTicks.Add(1)
		c := gcCycles()
		for _, s := range scratches {
			s.collected(c)
		}
		armGCTick()
	}, struct{}{})
}

func init() { armGCTick() }
