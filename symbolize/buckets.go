package symbolize

// bucketIndex is a direct-mapped index over a sorted array of addresses
// (keys), so that finding the last key at or before an address costs a
// load from it and a bisection of the few keys of one bucket instead of a
// bisection of all of them: on a large batch of random addresses the
// bisection's steps are cache and TLB misses, and they were the largest
// part of a lookup.
//
// The keys' span [keys[0], keys[n-1]] is cut into buckets of 1<<shift
// bytes, about one per key; b[k] is the index of the last key at or before
// the first address of bucket k, and the last entry of b is n-1, so the
// answer for an address of bucket k is one of keys[b[k] : b[k+1]+1]. The
// index costs 4 bytes per key. Keys that are not sorted (hostile input)
// give wrong answers but never an index out of range.
type bucketIndex struct {
	base  uint64 // keys[0]
	shift uint8
	b     []int32 // nil: bisect all the keys
}

// noIndex is the empty index: last bisects all the keys.
var noIndex bucketIndex

// minBucketKeys is the fewest keys worth an index: below it a bisection
// stays within a cache line or two.
const minBucketKeys = 32

// newBucketIndex builds the index of keys (sorted, fewer than 2^31).
// Cost: O(n) time, at most 4(n+1) bytes.
func newBucketIndex(keys []uint64) bucketIndex { return newBucketIndexOf(nil, keys) }

// newBucketIndexIn is newBucketIndex with the index's array from sl
// (slabMake; nil: the heap).
func newBucketIndexIn(sl *slab, keys []uint64) bucketIndex { return newBucketIndexOf(sl, keys) }

// newBucketIndexOf is newBucketIndex over keys of either width: 32-bit
// keys are offsets from a base the caller subtracts from the addresses it
// asks (lastOf). The arithmetic is in 64 bits, so that the index of
// offsets k[i] - c is the index of the keys k[i] with its base moved by c,
// also for unsorted keys (hostile input), whose differences wrap. The
// index's array comes from sl (slabMake; nil: the heap).
func newBucketIndexOf[K uint32 | uint64](sl *slab, keys []K) bucketIndex {
	n := len(keys)
	if n < minBucketKeys {
		return bucketIndex{}
	}
	x := bucketIndex{base: uint64(keys[0])}
	span := uint64(keys[n-1]) - x.base
	for span>>x.shift >= uint64(n) {
		x.shift++
	}
	nb := int(span>>x.shift) + 2 // the last key's bucket, and one past it
	b := slabMake[int32](sl, nb)
	// A pass over the keys rather than the buckets: the buckets that
	// start before key i (at an offset below its own) and are not filled
	// yet end at key i-1; those left, at the last key. For sorted keys
	// each entry is the last key at or before its bucket's start (the
	// last bucket's: the last key); for others the entries only stay in
	// [0, n).
	next, shift := 0, x.shift&63
	mask, last := uint64(1)<<shift-1, uint64(nb-1)
	for i := 1; i < n; i++ {
		// ⌈d / 2^shift⌉ buckets start below d, without overflow.
		d := uint64(keys[i]) - x.base
		end := int(min(d>>shift+(d&mask+mask)>>shift, last))
		for ; next < end; next++ {
			b[next] = int32(i - 1)
		}
	}
	for ; next < nb; next++ {
		b[next] = int32(n - 1)
	}
	x.b = b
	return x
}

// window returns the part [lo, hi) of the n keys the index was built on
// that holds the last key at or before addr, if any; ok is false when
// addr is before the first key (only known with an index: without one
// the window is every key). 0 <= lo <= hi <= n.
func (x *bucketIndex) window(n int, addr uint64) (lo, hi int, ok bool) {
	if x.b == nil {
		return 0, n, true
	}
	if addr < x.base {
		return 0, 0, false
	}
	if k := (addr - x.base) >> x.shift; k < uint64(len(x.b)-1) {
		lo, hi = int(x.b[k]), int(x.b[k+1])+1
	} else {
		lo, hi = int(x.b[len(x.b)-1]), n
	}
	return min(lo, n), min(hi, n), true
}

// last returns the index of the last of keys at or before addr, or -1
// when addr is before keys[0]. keys must be the array the index was built
// on. Cost: no allocation; a load and a bisection of about two keys when
// the keys are spread evenly, a bisection of all of them at worst.
func (x *bucketIndex) last(keys []uint64, addr uint64) int { return lastOf(x, keys, addr) }

// lastOf is x.last over keys of either width (see newBucketIndexOf).
func lastOf[K uint32 | uint64](x *bucketIndex, keys []K, addr uint64) int {
	lo, hi, ok := x.window(len(keys), addr)
	if !ok {
		return -1
	}
	// upper_bound over keys[lo:hi], minus one.
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if uint64(keys[m]) <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}
