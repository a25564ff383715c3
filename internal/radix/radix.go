// Package radix sorts packed uint64 keys (an address or offset in the high
// bits, an index in the low ones) for package symbolize's indexes and the
// CLI's batch order: one sort for both.
package radix

import "slices"

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
