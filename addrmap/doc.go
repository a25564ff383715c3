// Package addrmap is the process-wide registry that maps an instruction
// pointer (or any address) to the value registered for the half-open address
// range [Start, End) that contains it; elfimage uses it to find the loaded
// image that holds a PC.
//
// # Views
//
// A [Map] publishes a view through an atomic pointer: a base snapshot of
// non-overlapping ranges sorted by Start with its index, and a delta of up
// to 16 ranges inserted since the base was built (in a map of n >= 64
// ranges, at most n/64). Readers ([Map.Lookup],
// [Map.LookupRange], [Map.Acquire], [Map.Len], [Map.All]) take no lock and
// never block: they load the current view and search it, and allocate
// nothing. Besides the sorted starts the base holds a direct-mapped bucket
// index (up to four 4-byte buckets per range, each at most as wide as the
// median distance between ranges, over the window of the address space
// where most ranges are): a lookup reads the bucket of its address and
// compares with the one or two ranges it names, so it costs the same few
// nanoseconds for 1 range or 1,000 when the ranges are spread as loaded
// objects are. Ranges crowded into one bucket, and those outside the
// window, are bisected, so no lookup costs more than O(log n); a pc the
// base does not hold then bisects the delta's sorted starts (at most four
// steps; the view keeps a sorted copy of each length the delta takes). A base
// of one or two ranges (the first range inserted into an empty map, or
// what a build leaves) is kept in the view's header, where Lookup compares
// the pc with it before anything else (no index, no further call).
//
// Writers ([Map.Insert], [Map.Remove], [Map.RemoveFunc], [Map.RemoveWait])
// are serialized by a mutex and change the view in place only in two ways
// a reader cannot see half done, both single atomic stores: a removal
// stores 0 into the removed entry's end (a tombstone; lookups miss it), and
// an insert writes the next free slot of the delta, which no reader reads
// yet, then publishes it by storing the delta's new length. An insert into
// a full delta or into an empty map, and a removal that leaves more
// tombstones than 16 plus the live ranges, instead build a new view of the
// live ranges (merged, sorted, the index rebuilt: O(n log n) time, four
// allocations of O(n) bytes, one for one or two ranges) and publish it
// with one pointer store. So an insert costs O(log n)
// time (the overlap check) and one allocation (its Ref; none with
// [Map.InsertRef], whose caller supplies the Ref, typically inside the
// value) plus, amortised over
// the inserts of a delta (16, or n/64 for n ranges when fewer), one build; a removal costs O(log n) and nothing
// allocated, amortised likewise. Readers that loaded an older view finish
// their search on it; the garbage collector frees it when none does. A
// removed value stays referenced by its tombstone until the next build
// (never more tombstones than 16 plus the live ranges). The design fits
// registries that are read on every PC lookup (symbolizing, unwinding,
// profiling) and written when code is loaded or unloaded.
//
// # Safe unload
//
// A value often stands for memory that its owner frees when the range is
// unregistered (an image that is unmapped when closed). Two kinds of reader
// exist:
//
//   - [Map.Acquire] returns a [Ref]: the value stays valid until
//     [Ref.Release], even if its range is removed meanwhile. Owners unregister
//     with [Map.RemoveFunc], which marks the range removed in the view at
//     once and runs the owner's free function exactly once, when the last Ref
//     on the entry is released (at once, before RemoveFunc returns, when none
//     is held). The unloader never blocks on readers. [Map.RemoveWait] is the
//     blocking form: it returns once no Ref is held. Use Acquire whenever the
//     value's memory can be freed by another goroutine.
//   - [Map.Lookup] and [Map.LookupRange] return the value without any
//     protection. Use them when the caller guarantees the lifetime itself (it
//     owns the value, or unregistering and freeing cannot happen while it
//     runs); they are the cheapest readers.
//
// The scheme is a per-entry reference count. Each inserted range gets a
// fresh entry object (a Ref) with one 64-bit state word: the number of Refs
// held in the low 63 bits and a "removed" bit at the top. Acquire
// increments the count with a compare-and-swap that fails when the removed
// bit is set; a remover first marks the entry removed in the view (its
// tombstone) and then sets the removed bit. Because the bit and the count live in the same
// word, every Acquire is ordered either before the removal (the remover sees
// its count and leaves the free to the last Release) or after it (the CAS
// sees the bit, the reader reloads the view, in which the entry is a
// tombstone). The transition to "removed with count zero" happens exactly once,
// so free runs exactly once, and the count can never rise from zero after
// removal. There is no ABA problem: entries are garbage-collected Go objects
// that are never reused (inserting the same range again creates a new
// entry; [Map.InsertRef] takes the caller's Ref only when it was never
// inserted before, and panics otherwise), so a stale pointer held by a
// reader still points at its own entry.
//
// Compared with the alternatives: epoch-based reclamation would make
// Acquire cheaper on a contended entry but needs a per-reader (per-thread)
// slot, which Go code cannot address without registration; hazard pointers
// need the same per-reader slots plus a scan on every removal. The
// reference count needs no registration, makes a lookup that holds nothing
// cost nothing extra, and frees as soon as the last reader lets go. Its
// cost is one CAS and one atomic add per Acquire/Release pair on the entry's
// cache line, which many cores acquiring the same entry contend on.
//
// A Ref that is never released keeps its value alive (free never runs);
// releasing a Ref twice panics when detected.
package addrmap
