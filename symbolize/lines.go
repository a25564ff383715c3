package symbolize

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"unsafe"

	"github.com/elfimage/elfimage/dwarf/line"
)

// lineTable is a decoded line program in the shape lookups want.
//
// The rows are kept narrow when they fit, as nearly all do: each row's
// address as a 32-bit offset from its sequence's start (off) and its
// position in 8 bytes (narrow), 12 bytes a row where the wide form (addrs,
// rows) takes 20. On a batch that indexes every unit the rows are the
// largest part of the indexes, and their first touches (page faults) a
// good part of the cost. A table with a row that does not fit (an
// address below its sequence's start or 2^32 or more above it, a file
// index or column of 2^16 or more) is wide throughout; wide is then set.
type lineTable struct {
	seqs []lineSeq // sorted by end
	// ends holds the sequences' ends (parallel to seqs) and endIndex
	// indexes them, when there are at least minBucketKeys sequences (a
	// file whose every function is a sequence): lookup then finds its
	// sequence without a bisection of all of them. Both empty otherwise.
	ends     []uint64
	endIndex bucketIndex
	indexes  []bucketIndex // over the addresses (offsets) of the long sequences
	wide     bool
	off      []uint32    // narrow: the rows' addresses less their sequence's start, in program order
	narrow   []narrowRow // narrow: the rows' positions, parallel to off
	addrs    []uint64    // wide: the rows' addresses, every sequence's, in program order
	rows     []lineRow   // wide: the rows' positions, parallel to addrs
	files    []string    // full path per file index; "" for an invalid entry
}

// lineSeq is one sequence: [start, end) with rows[first:last] (the
// end_sequence row is not stored); index is its entry in the table's
// indexes, -1 for a sequence too short to need one.
type lineSeq struct {
	start, end  uint64
	first, last int32
	index       int32
}

// lineRow is the position of a row: file index, line and column.
type lineRow struct {
	file, line, col uint32
}

// narrowRow is a lineRow whose file index and column are below 2^16.
type narrowRow struct {
	line      uint32
	file, col uint16
}

// rowAddr returns the address of row j (of sequence s).
func (t *lineTable) rowAddr(s *lineSeq, j int32) uint64 {
	if t.wide {
		return t.addrs[j]
	}
	return s.start + uint64(t.off[j])
}

// lineTable returns the line table of u, decoding it the first time; units
// that share a line program share the table.
// Units indexed in parallel (Prepare) decode different tables at once;
// the lock is held only to find or add the table's entry.
func (d *dwarfData) lineTable(u *unit) (*lineTable, error) {
	off := u.root.stmtList
	d.lineMu.Lock()
	r, ok := d.lines[off]
	if !ok {
		r = &lineResult{}
		d.lines[off] = r
	}
	d.lineMu.Unlock()
	r.once.Do(func() {
		// Stays the answer if decoding faults on a truncated mapping
		// (the panic leaves the Once done).
		r.err = fmt.Errorf("%w: in the line program at .debug_line+%#x", ErrFault, off)
		r.t, r.err = decodeLines(d, off, u.compDir)
	})
	return r.t, r.err
}

// concurrentLines is the size of a unit (header to end, in .debug_info
// bytes) from which build decodes its line program on a goroutine of its
// own (unless Prepare queued it as a job): below it the goroutine costs
// more than the overlap saves (a unit of gcc's -O2 output with 1,000
// functions is about 100 KB).
const concurrentLines = 64 << 10

// lineTableAsync starts lineTable(u) on a new goroutine and returns the
// function that waits for its result. A panic there (a fault on the
// mapped file, with the caller's panic-on-fault setting, which the new
// goroutine takes) is raised again in the waiting goroutine, so that
// the caller's guard sees it as if lineTable had run there.
func (d *dwarfData) lineTableAsync(u *unit) func() (*lineTable, error) {
	onFault := debug.SetPanicOnFault(true)
	debug.SetPanicOnFault(onFault)
	var (
		t    *lineTable
		err  error
		p    any // the goroutine's panic, when it panicked
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		defer func() { p = recover() }()
		debug.SetPanicOnFault(onFault)
		t, err = d.lineTable(u)
	}()
	return func() (*lineTable, error) {
		<-done
		if p != nil {
			panic(p)
		}
		return t, err
	}
}

// decodeLines runs the line program at off (DWARF 5 section 6.2) and
// keeps its rows, sequences and file names, resolved as LLVM's
// Prologue::getFileNameByIndex does for absolute paths. Sequences of
// discarded code (d.live) are dropped.
func decodeLines(d *dwarfData, off uint64, compDir string) (*lineTable, error) {
	r, err := line.NewReader(line.Sections{Line: d.line, Str: d.sec.Str, LineStr: d.sec.LineStr, Order: d.sec.Order}, off, compDir)
	if err != nil {
		return nil, err
	}
	h := r.Header()
	t := &lineTable{}
	// Rows are at least one byte of program each, and after the merging
	// below about one per three bytes in gcc output. As for subroutines
	// (build), the untouched tail of a fresh allocation costs address
	// space, not pages. The guesses of all line programs are bounded by
	// guessCap (line programs may overlap).
	prog := h.End - h.ProgramOffset
	guess := d.guessCap(d.rowGuess(prog), unsafe.Sizeof(uint32(0))+unsafe.Sizeof(narrowRow{}))
	// The offsets and the narrow rows share one array of a lane of the
	// slab, the offsets first: once the rows are known the narrow rows
	// move down to just after the offsets kept, and the rest is given
	// back to the lane (slabTrim) for the ends and bucket indexes below
	// and the lane's next job.
	l := d.slab.lane()
	defer putLane(l)
	half := (guess + 1) / 2 // narrowRows holding guess offsets
	blk := slabMake[narrowRow](l, half+guess)
	if guess > 0 {
		t.off = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(blk))), guess)[:0]
		t.narrow = blk[half:half:len(blk)]
	}
	hw := 0 // the most narrow rows held at once
	var buf [128]line.PosRow
	first := int32(0)
	var start uint64
	empty := true
	n := int32(0) // rows kept
	// The narrow rows are appended in locals (t's until widen).
	offs, narrow := t.off, t.narrow
	for {
		k, rerr := r.ReadRows(buf[:])
		for i := 0; i < k; i++ {
			if empty {
				start, first, empty = buf[i].Address, n, false
			}
			if !t.wide {
				// The rows of a narrow sequence, up to one that ends
				// it or does not fit.
				var m int
				offs, narrow, m = keepNarrow(buf[i:k], offs, narrow, start, first)
				n = int32(len(offs))
				if i += m; i == k {
					break
				}
			}
			row := &buf[i]
			if row.EndSequence {
				if start < row.Address && n > first && d.live.ok(start) {
					t.seqs = append(t.seqs, lineSeq{start, row.Address, first, n, -1})
				} else {
					n = first
					if t.wide {
						t.rows, t.addrs = t.rows[:n], t.addrs[:n]
					} else {
						hw = max(hw, len(narrow))
						narrow, offs = narrow[:n], offs[:n]
					}
				}
				empty = true
				continue
			}
			if !t.wide {
				// keepNarrow stopped at a row the narrow form cannot
				// hold: from here on the table is wide.
				t.off, t.narrow = offs, narrow
				t.widen(start, first)
				offs, narrow = nil, nil
			}
			f := uint32(row.File)
			if row.File > 1<<32-1 {
				f = 1<<32 - 1
			}
			// As keepNarrow keeps the narrow rows.
			lr := lineRow{f, row.Line, row.Column}
			if n > first {
				if t.addrs[n-1] == row.Address {
					t.rows[n-1] = lr
					continue
				}
				if t.rows[n-1] == lr {
					continue
				}
			}
			t.rows = append(t.rows, lr)
			t.addrs = append(t.addrs, row.Address)
			n++
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return nil, rerr
		}
	}
	if !t.wide {
		t.off, t.narrow = offs, narrow
		if l != nil && len(narrow) > 0 && cap(narrow) == guess && cap(offs) == guess &&
			unsafe.SliceData(narrow) == &blk[half] && unsafe.Pointer(unsafe.SliceData(offs)) == unsafe.Pointer(unsafe.SliceData(blk)) {
			n := len(narrow)
			k := (n + 1) / 2
			copy(blk[k:k+n], narrow)
			blk = slabTrim(l, blk[:k+n], half+max(hw, n))
			t.off, t.narrow = offs[:n:n], blk[k:k+n:k+n]
		}
	}
	if !t.wide {
		d.seeRows(prog, len(t.off))
	}
	slices.SortStableFunc(t.seqs, func(a, b lineSeq) int {
		if a.end != b.end {
			if a.end < b.end {
				return -1
			}
			return 1
		}
		return 0
	})
	if len(t.seqs) >= minBucketKeys {
		t.ends = slabMake[uint64](l, len(t.seqs))
		for i := range t.seqs {
			t.ends[i] = t.seqs[i].end
		}
		t.endIndex = newBucketIndexOf(l, t.ends)
	}
	for i := range t.seqs {
		if sq := &t.seqs[i]; sq.last-sq.first >= minBucketKeys {
			sq.index = int32(len(t.indexes))
			if t.wide {
				t.indexes = append(t.indexes, newBucketIndexOf(l, t.addrs[sq.first:sq.last]))
			} else {
				t.indexes = append(t.indexes, newBucketIndexOf(l, t.off[sq.first:sq.last]))
			}
		}
	}
	files := r.Files()
	t.files = make([]string, len(files))
	for i := range files {
		t.files[i] = filePath(h, files, uint64(i), compDir)
	}
	return t, nil
}

// rowGuess returns the capacity guess of decodeLines for a line program
// of prog bytes: a row per three bytes (gcc -O2 output keeps about one per
// seven, our images one per five and a half), and once the tables decoded
// so far (seeRows) hold 256 KiB of program, their rows per byte plus a
// quarter and 64 rows, when that is less. A program denser than its batch
// so far grows its arrays on the heap, as with any guess exceeded.
func (d *dwarfData) rowGuess(prog uint64) uint64 {
	g := min(prog/3+1, 1<<20)
	if v := d.rowsSeen.Load(); v&(1<<32-1) >= 256<<10 {
		rows, bytes := v>>32, v&(1<<32-1)
		// rows <= bytes < 2^32: neither product overflows.
		g = min(g, (prog/bytes*rows+prog%bytes*rows/bytes)*5/4+64)
	}
	return g
}

// seeRows adds a narrow table of rows kept from prog bytes of program
// to the counts rowGuess uses, while both stay below 2^32.
func (d *dwarfData) seeRows(prog uint64, rows int) {
	for {
		v := d.rowsSeen.Load()
		r, b := v>>32+uint64(rows), v&(1<<32-1)+prog
		if r >= 1<<32 || b >= 1<<32 || r > b || d.rowsSeen.CompareAndSwap(v, r<<32|b) {
			return
		}
	}
}

// keepNarrow appends the rows of rows to a narrow table's offs and narrow,
// for a sequence that starts at start with its first kept row at index
// first (at most len(offs)), until a row that ends the sequence or does
// not fit the narrow form. It keeps only the rows a lookup can return: of
// several rows at one address the last (lookup takes the last row at or
// before the address), and not a row that repeats the position of the row
// before it (the earlier row answers the same); gcc -O2 output loses about
// half its rows this way. It returns the arrays and the number of rows it
// took.
func keepNarrow(rows []line.PosRow, offs []uint32, narrow []narrowRow, start uint64, first int32) ([]uint32, []narrowRow, int) {
	// len(offs) (= len(narrow)) is the rows kept: n in decodeLines.
	for i := range rows {
		row := &rows[i]
		if row.EndSequence || row.Address < start || (row.Address-start)>>32 != 0 || row.File > 1<<16-1 || row.Column > 1<<16-1 {
			return offs, narrow, i
		}
		lr, o := narrowRow{row.Line, uint16(row.File), uint16(row.Column)}, uint32(row.Address-start)
		if n := len(offs); int32(n) > first {
			if offs[n-1] == o {
				narrow[n-1] = lr
				continue
			}
			if narrow[n-1] == lr {
				continue
			}
		}
		narrow = append(narrow, lr)
		offs = append(offs, o)
	}
	return offs, narrow, len(rows)
}

// widen turns the narrow rows decoded so far into the wide form: those of
// the sequences in t.seqs (still in program order), and those from first
// on, of the sequence being decoded, which starts at start.
func (t *lineTable) widen(start uint64, first int32) {
	t.wide = true
	t.addrs = make([]uint64, len(t.off), max(cap(t.off), 1))
	t.rows = make([]lineRow, len(t.narrow), max(cap(t.narrow), 1))
	for i, r := range t.narrow {
		t.rows[i] = lineRow{uint32(r.file), r.line, uint32(r.col)}
	}
	for _, s := range t.seqs {
		for j := s.first; j < s.last; j++ {
			t.addrs[j] = s.start + uint64(t.off[j])
		}
	}
	for j := int(first); j < len(t.off); j++ {
		t.addrs[j] = start + uint64(t.off[j])
	}
	t.off, t.narrow = nil, nil
}

// isAbs reports whether p is an absolute POSIX or Windows path, as LLVM's
// isPathAbsoluteOnWindowsOrPosix.
func isAbs(p string) bool {
	if len(p) > 0 && p[0] == '/' {
		return true
	}
	if len(p) > 0 && p[0] == '\\' {
		return true
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') &&
		((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z'))
}

// appendPath joins components with '/' like llvm::sys::path::append
// (POSIX style): empty components are skipped, no separator is doubled.
func appendPath(p string, comps ...string) string {
	for _, c := range comps {
		if c == "" {
			continue
		}
		switch {
		case len(p) > 0 && p[len(p)-1] == '/':
			for len(c) > 0 && c[0] == '/' {
				c = c[1:]
			}
			p += c
		case c[0] == '/' || p == "":
			p += c
		default:
			p += "/" + c
		}
	}
	return p
}

// filePath is the absolute path of file entry i, "" when the index is
// invalid (file 0 before version 5) or the entry has no name.
func filePath(h *line.Header, files []line.FileEntry, i uint64, compDir string) string {
	if h.Version < 5 && i == 0 || i >= uint64(len(files)) {
		return ""
	}
	e := &files[i]
	if e.Name == "" {
		return ""
	}
	if isAbs(e.Name) {
		return e.Name
	}
	var inc string
	if h.Version >= 5 {
		if e.Dir < uint64(len(h.Dirs)) {
			inc = h.Dirs[e.Dir]
		}
	} else if e.Dir > 0 && e.Dir < uint64(len(h.Dirs)) {
		inc = h.Dirs[e.Dir] // Dirs[0] is the compilation directory
	}
	// LLVM 14 prefixes the compilation directory to any relative
	// directory, directory 0 of DWARF 5 included (later LLVM versions
	// skip it for directory 0, which names the compilation directory).
	p := ""
	if compDir != "" && !isAbs(inc) {
		p = appendPath(p, compDir)
	}
	return appendPath(p, inc, e.Name)
}

// lookup returns the row that holds for addr: in the sequence with the
// smallest end above addr, if it starts at or before addr, the last row
// at or before addr (LLVM's lookupAddress and findRowInSeq). Cost: a
// bisection of the sequences (a bucket-index lookup in their ends when
// there are minBucketKeys or more) and a bucket-index lookup in the
// sequence's rows; no allocation.
func (t *lineTable) lookup(addr uint64) (lineRow, bool) {
	lo, hi := 0, len(t.seqs)
	if t.endIndex.b != nil {
		// The first sequence that ends after addr: the one after the
		// last that ends at or before it.
		lo = lastOf(&t.endIndex, t.ends, addr) + 1
		hi = lo
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.seqs[m].end <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(t.seqs) || t.seqs[lo].start > addr {
		return lineRow{}, false
	}
	s := &t.seqs[lo]
	// The last row at or before addr; the first row is at start, so at
	// least that one (also when hostile rows are out of order).
	x := &noIndex
	if s.index >= 0 {
		x = &t.indexes[s.index]
	}
	if t.wide {
		i := x.last(t.addrs[s.first:s.last], addr)
		return t.rows[int(s.first)+max(i, 0)], true
	}
	// Every row of a narrow table is at or above its sequence's start,
	// and addr is too: the offsets compare as the addresses.
	i := lastOf(x, t.off[s.first:s.last], addr-s.start)
	r := t.narrow[int(s.first)+max(i, 0)]
	return lineRow{uint32(r.file), r.line, uint32(r.col)}, true
}

// file returns the path of file index i, "" when unknown.
func (t *lineTable) file(i uint64) string {
	if t == nil || i >= uint64(len(t.files)) {
		return ""
	}
	return t.files[i]
}
