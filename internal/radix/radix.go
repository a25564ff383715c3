// Package radix sorts packed uint64 keys (an address or offset in the high
// bits, an index in the low ones) for package symbolize's indexes and the
// CLI's batch order: one sort for both.
package radix

import (
	"math/bits"
	"slices"
	"sync"
)

// Sort sorts keys, all below 1<<keyBits, in increasing order and returns
// the sorted slice: keys itself or tmp's backing array, grown as needed
// (the other is scratch the caller may keep for the next call). Inputs of
// 256 keys or more are sorted by a least-significant-digit radix sort of
// 8-bit digits, skipping digits all keys share (packed keys of one file
// have few distinct high digits): for 10,000 keys of 37 bits about an
// eighth of slices.Sort's time; shorter ones by slices.Sort. Cost:
// O(n·keyBits/8), no allocation once tmp has grown to len(keys).
func Sort(keys, tmp []uint64, keyBits int) (sorted, scratch []uint64) {
	if len(keys) < 256 {
		slices.Sort(keys)
		return keys, tmp
	}
	if cap(tmp) < len(keys) {
		tmp = make([]uint64, len(keys))
	}
	src, dst := keys, tmp[:len(keys)]
	var count [256]int
	for shift := 0; shift < keyBits; shift += 8 {
		clear(count[:])
		for _, k := range src {
			count[k>>shift&0xff]++
		}
		if count[src[0]>>shift&0xff] == len(src) {
			continue // every key has this digit
		}
		sum := 0
		for i, c := range count {
			count[i], sum = sum, sum+c
		}
		for _, k := range src {
			d := k >> shift & 0xff
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	return src, dst
}

// SortHigh sorts keys by their bits [low, high) alone, stably: keys
// equal in those bits keep their order. Keys whose low bits already
// increase along the slice (an index packed below an address, the keys
// made in index order) therefore come out as Sort sorts them, without
// passes over the low bits. The bits at high and above must be the same
// in every key (they are not looked at; 0 <= low <= high <= 64). It
// returns the sorted slice, keys itself or tmp's backing array, grown as
// needed, and the other as scratch.
//
// Inputs of 256 keys or more are sorted by a least-significant-digit
// radix sort of as few passes as digits of at most 11 bits allow (fewer
// bits for shorter inputs, whose counters would cost more than the
// passes), the digits' counts taken in one pass before them and a digit
// every key shares skipped; shorter ones by an insertion sort. Cost:
// O(n·⌈(high−low)/11⌉) time, at most 8 passes; 2^11 counters a pass from
// a pool (64 KiB the first time), no allocation once tmp has grown to
// len(keys).
func SortHigh(keys, tmp []uint64, low, high int) (sorted, scratch []uint64) {
	nbits := high - low
	if nbits <= 0 || len(keys) < 2 {
		return keys, tmp
	}
	if len(keys) < 256 || uint64(len(keys)) > 1<<32-1 {
		// Insertion sort on the high bits, stable (the counts below are
		// 32-bit; a longer input is not sorted faster by digits).
		if len(keys) >= 256 {
			slices.SortStableFunc(keys, func(a, b uint64) int {
				if a>>low < b>>low {
					return -1
				} else if a>>low > b>>low {
					return 1
				}
				return 0
			})
			return keys, tmp
		}
		for i := 1; i < len(keys); i++ {
			k := keys[i]
			j := i
			for ; j > 0 && keys[j-1]>>low > k>>low; j-- {
				keys[j] = keys[j-1]
			}
			keys[j] = k
		}
		return keys, tmp
	}
	// Digits of at most maxw bits, about a bit less than log2 of the
	// input's length (so that the counters stay fewer than the keys):
	// passes = ⌈nbits/maxw⌉, each digit ⌈nbits/passes⌉ wide.
	maxw := min(maxDigit, max(8, bits.Len(uint(len(keys)))-3))
	passes := (nbits + maxw - 1) / maxw
	w := uint((nbits + passes - 1) / passes)
	mask := uint64(1)<<w - 1
	// The counters come from a pool (zeroed here): a caller that sorts
	// several short inputs, or several callers, reuse one set of pages.
	counts := countPool.Get().(*[8][1 << maxDigit]uint32)
	defer countPool.Put(counts)
	count := counts[:passes]
	for d := range count {
		clear(count[d][:1<<w]) // the digits' range
	}
	// The counts of the first three digits in one pass (the input's
	// length is below 2^32, so they do not overflow); those of the
	// others, rare (more than 33 bits), in a pass each.
	if passes == 1 {
		c0 := &count[0]
		for _, k := range keys {
			c0[k>>low&mask&(1<<maxDigit-1)]++
		}
	} else if passes == 2 {
		c0, c1 := &count[0], &count[1]
		for _, k := range keys {
			k >>= low & 63
			c0[k&mask&(1<<maxDigit-1)]++
			c1[k>>(w&63)&mask&(1<<maxDigit-1)]++
		}
	} else {
		c0, c1, c2 := &count[0], &count[1], &count[2]
		for _, k := range keys {
			k >>= low & 63
			c0[k&mask&(1<<maxDigit-1)]++
			c1[k>>(w&63)&mask&(1<<maxDigit-1)]++
			c2[k>>(2*w&63)&mask&(1<<maxDigit-1)]++
		}
		for d := 3; d < passes; d++ {
			c := &count[d]
			shift := uint(low) + uint(d)*w
			for _, k := range keys {
				c[k>>shift&mask&(1<<maxDigit-1)]++
			}
		}
	}
	if cap(tmp) < len(keys) {
		tmp = make([]uint64, len(keys))
	}
	src, dst := keys, tmp[:len(keys)]
	for d := range passes {
		shift := uint(low) + uint(d)*w
		c := &count[d]
		if int(c[src[0]>>shift&mask&(1<<maxDigit-1)]) == len(src) {
			continue // every key has this digit
		}
		sum := uint32(0)
		for i := range 1 << w {
			c[i], sum = sum, sum+c[i]
		}
		for _, k := range src {
			i := k >> (shift & 63) & mask & (1<<maxDigit - 1)
			dst[c[i]] = k
			c[i]++
		}
		src, dst = dst, src
	}
	return src, dst
}

// maxDigit is the widest digit of SortHigh, in bits.
const maxDigit = 11

// countPool holds SortHigh's counters, a set for each of at most 8 passes
// (64 KiB, of which a sort touches the sets of its passes).
var countPool = sync.Pool{New: func() any { return new([8][1 << maxDigit]uint32) }}
