package elfimage

import (
	"debug/elf"
	"slices"
	"testing"

	"github.com/elfimage/elfimage/meta"
)

// TestPlaceQueryGroup: the run of .debug_line, .debug_line_str and the
// procedure table moves before other sections exactly when where
// buildDWARF put it crosses a 2 MiB boundary (or lies in no whole span of
// the tail) and an earlier place puts it inside one whole span; the other
// sections keep their order.
func TestPlaceQueryGroup(t *testing.T) {
	const mib = 1 << 20
	sec := func(name string, size int) builtSection {
		return builtSection{hdr: elf.SectionHeader{Name: name, Addralign: 1}, data: make([]byte, size)}
	}
	names := func(tail []builtSection) []string {
		var n []string
		for _, s := range tail {
			n = append(n, s.hdr.Name)
		}
		return n
	}
	// The 10,000-procedure benchmark image's shape: the tail starts at
	// 2.5 MB, the run would end past 6 MiB.
	bench := func() []builtSection {
		return []builtSection{
			sec(".debug_abbrev", 238), sec(".debug_info", 1510870), sec(".debug_aranges", 48),
			sec(".debug_str", 266796), sec(".debug_loclists", 839996),
			sec(".debug_line", 658431), sec(".debug_line_str", 30), sec(meta.SectionProcs, 515284),
		}
	}
	cases := []struct {
		name  string
		tail  []builtSection
		start uint64
		want  []string
	}{
		{"crossing 6 MiB: moved before .debug_loclists", bench(), 0x282110,
			[]string{".debug_abbrev", ".debug_info", ".debug_aranges", ".debug_str", ".debug_line", ".debug_line_str", meta.SectionProcs, ".debug_loclists"}},
		{"already inside a whole span", append(bench(), sec(".debug_frame", mib)), 0x282110 - 0x30000, nil},
		{"no whole span after an earlier place either", bench(), 0x282110 - 0x110000, nil},
		{"small image", []builtSection{sec(".debug_info", 1000), sec(".debug_line", 500), sec(".debug_line_str", 10), sec(meta.SectionProcs, 400)}, 0x9000, nil},
		{"run larger than a span", []builtSection{sec(".debug_info", 3*mib), sec(".debug_line", 2*mib), sec(".debug_line_str", 10), sec(meta.SectionProcs, 400), sec(".debug_frame", 5*mib)}, mib, nil},
		{"no place works", []builtSection{sec(".debug_info", 3*mib+mib/2), sec(".debug_line", mib), sec(".debug_line_str", 10), sec(meta.SectionProcs, mib/2)}, mib, nil},
		{"no run", []builtSection{sec(".debug_info", 5*mib), sec(".debug_line", mib), sec(meta.SectionProcs, mib/2)}, mib, nil},
	}
	for _, c := range cases {
		before := names(c.tail)
		placeQueryGroup(c.tail, c.start)
		want := c.want
		if want == nil {
			want = before
		}
		if got := names(c.tail); !slices.Equal(got, want) {
			t.Errorf("%s: order %v, want %v", c.name, got, want)
		}
	}
	// Where the run lands in the first case: inside [4 MiB, 6 MiB).
	tail := bench()
	placeQueryGroup(tail, 0x282110)
	off := uint64(0x282110)
	for _, s := range tail {
		if s.hdr.Name == ".debug_line" && off/(2*mib) != 2 {
			t.Errorf(".debug_line at %#x, want in [4 MiB, 6 MiB)", off)
		}
		off += uint64(len(s.data))
		if s.hdr.Name == meta.SectionProcs && (off-1)/(2*mib) != 2 {
			t.Errorf("procedure table ends at %#x, want in [4 MiB, 6 MiB)", off)
		}
	}
}
