package perfmap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/elfimage/elfimage/formaterr"
)

// Section is the Source [Parse] gives its *formaterr.Error values.
const Section = "perf map"

// MaxLine is the longest line [Parse] reads, in bytes including the
// newline; a longer line fails the whole parse.
const MaxLine = 64 << 10

// Map is a parsed perf map.
type Map struct {
	// Raw holds every well-formed line in file order (including those of
	// size 0, which cover nothing).
	Raw []Entry
	// Entries is the resolved table: sorted by Start, non-overlapping and
	// without empty entries. Each address maps to the name of the last
	// line of the file that covers it (later lines win, as perf's readers
	// assume for reused code addresses); a line partly overwritten by later
	// lines contributes only the pieces still visible, so one line may give
	// several Entries.
	Entries []Entry
	// Skipped counts malformed lines, skipped as perf skips them. Blank
	// lines are not counted.
	Skipped int
	// FirstSkip is a *formaterr.Error describing the first malformed
	// line (section "perf map", the line's byte offset, the field, and the
	// 1-based line number in the message), or nil.
	FirstSkip error
}

// Parse reads a perf map from r. It accepts what perf and other producers
// write: START and SIZE in hexadecimal with or without "0x"/"0X", digits of
// either case, separated by one or more spaces or tabs; NAME the rest of the
// line, which may contain spaces, without trailing spaces, tabs and
// carriage returns; blank lines; a last line without a newline. Lines that
// are not of this form (no name, a number missing, longer than 16 digits,
// or START+SIZE past 2^64) are skipped and counted in [Map.Skipped], as perf
// skips them; [Map.FirstSkip] says where the first one is.
//
// The error is nil, an I/O error of r, or a *formaterr.Error for a line
// longer than [MaxLine] (nothing further can be trusted to be a line
// boundary); with an error, the Map holds the lines before it, unresolved
// (Entries empty). Cost: O(n log n) time for n lines, memory proportional to the
// input.
func Parse(r io.Reader) (*Map, error) {
	m := &Map{}
	br := bufio.NewReaderSize(r, 4096)
	var line []byte
	var off uint64
	for n := 1; ; n++ {
		line = line[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if len(line)+len(chunk) > MaxLine {
				return m, &formaterr.Error{Source: Section, Offset: off, Field: "line", Msg: fmt.Sprintf("line %d longer than %d bytes", n, MaxLine)}
			}
			line = append(line, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return m, err
		}
		if len(line) > 0 {
			m.parseLine(line, off, n)
			off += uint64(len(line))
		}
		if err == io.EOF {
			break
		}
	}
	m.resolve()
	return m, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

func (m *Map) parseLine(line []byte, off uint64, n int) {
	line = bytes.TrimRight(line, " \t\r\n")
	i := 0
	for i < len(line) && isSpace(line[i]) {
		i++
	}
	if i == len(line) {
		return // blank
	}
	fail := func(field, msg string) {
		m.Skipped++
		if m.FirstSkip == nil {
			m.FirstSkip = &formaterr.Error{Source: Section, Offset: off + uint64(i), Field: field, Msg: fmt.Sprintf("line %d: %s", n, msg)}
		}
	}
	start, j, ok := parseHex(line, i)
	if !ok {
		fail("START", "not a hexadecimal number of at most 16 digits")
		return
	}
	if i = j; i == len(line) || !isSpace(line[i]) {
		fail("START", "not followed by a space")
		return
	}
	for i < len(line) && isSpace(line[i]) {
		i++
	}
	size, j, ok := parseHex(line, i)
	if !ok {
		fail("SIZE", "not a hexadecimal number of at most 16 digits")
		return
	}
	if i = j; i == len(line) || !isSpace(line[i]) {
		fail("NAME", "missing")
		return
	}
	for i < len(line) && isSpace(line[i]) {
		i++
	}
	if i == len(line) {
		fail("NAME", "missing")
		return
	}
	if size > math.MaxUint64-start {
		fail("SIZE", fmt.Sprintf("%#x + %#x runs past the address space", start, size))
		return
	}
	m.Raw = append(m.Raw, Entry{Start: start, Size: size, Name: string(line[i:])})
}

// parseHex parses an optionally 0x-prefixed hexadecimal number at b[i:]
// and returns it and the offset after it.
func parseHex(b []byte, i int) (v uint64, end int, ok bool) {
	if i+1 < len(b) && b[i] == '0' && (b[i+1] == 'x' || b[i+1] == 'X') {
		i += 2
	}
	digits := 0
	for ; i < len(b); i++ {
		c := b[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return v, i, digits > 0
		}
		if digits == 16 {
			return 0, i, false
		}
		v = v<<4 | uint64(d)
		digits++
	}
	return v, i, digits > 0
}

// resolve builds m.Entries from m.Raw: a sweep over the sorted range
// boundaries with a max-heap of the raw indexes covering the current point.
func (m *Map) resolve() {
	var order []int32
	var points []uint64
	for i, e := range m.Raw {
		if e.Size == 0 {
			continue
		}
		order = append(order, int32(i))
		points = append(points, e.Start, e.End())
	}
	if len(order) == 0 {
		m.Entries = nil
		return
	}
	slices.SortFunc(order, func(a, b int32) int {
		sa, sb := m.Raw[a].Start, m.Raw[b].Start
		switch {
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return int(a - b)
	})
	slices.Sort(points)
	points = slices.Compact(points)
	var h maxHeap
	next := 0
	out := make([]Entry, 0, len(order))
	last := int32(-1)
	for k, p := range points {
		for next < len(order) && m.Raw[order[next]].Start <= p {
			h.push(order[next])
			next++
		}
		for len(h) > 0 && m.Raw[h[0]].End() <= p {
			h.pop()
		}
		if len(h) == 0 || k+1 == len(points) {
			last = -1
			continue
		}
		w, end := h[0], points[k+1]
		if w == last && out[len(out)-1].End() == p {
			out[len(out)-1].Size = end - out[len(out)-1].Start
			continue
		}
		out = append(out, Entry{Start: p, Size: end - p, Name: m.Raw[w].Name})
		last = w
	}
	m.Entries = out
}

// maxHeap is a binary max-heap of indexes into Map.Raw: the latest line
// on top.
type maxHeap []int32

func (h *maxHeap) push(v int32) {
	*h = append(*h, v)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] >= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *maxHeap) pop() {
	s := *h
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, r, big := 2*i+1, 2*i+2, i
		if l < n && s[l] > s[big] {
			big = l
		}
		if r < n && s[r] > s[big] {
			big = r
		}
		if big == i {
			break
		}
		s[i], s[big] = s[big], s[i]
		i = big
	}
	*h = s
}

// ErrNotFound is returned (wrapped) when no entry covers a pc.
var ErrNotFound = errors.New("perfmap: no entry covers pc")

// Lookup returns the entry of [Map.Entries] covering pc (Start <= pc <
// End) by bisection. Cost: O(log n), no allocation.
func (m *Map) Lookup(pc uint64) (Entry, bool) {
	lo, hi := 0, len(m.Entries)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.Entries[mid].End() <= pc {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(m.Entries) && m.Entries[lo].Start <= pc {
		return m.Entries[lo], true
	}
	return Entry{}, false
}

// Find is [Map.Lookup] returning an error wrapping [ErrNotFound] (with the
// pc) on a miss.
func (m *Map) Find(pc uint64) (Entry, error) {
	if e, ok := m.Lookup(pc); ok {
		return e, nil
	}
	return Entry{}, fmt.Errorf("%w %#x", ErrNotFound, pc)
}
