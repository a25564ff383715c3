package frame

import (
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/readelf"
)

func x86Name(r arch.Reg) string { return readelf.X86_64RegName(int(r)) }

// compareRows checks our Table for fde against readelf's rows.
func compareRows(t *testing.T, fde *ParsedFDE, re readelf.InterpEntry) {
	t.Helper()
	rows, err := Table(fde)
	if err != nil {
		t.Errorf("FDE %#x: Table: %v", fde.Offset, err)
		return
	}
	if len(re.Rows) == 0 {
		return // readelf prints no rows for an FDE without instructions
	}
	if len(rows) != len(re.Rows) {
		t.Errorf("FDE %#x: %d rows, readelf %d\nreadelf: %v", fde.Offset, len(rows), len(re.Rows), re.Rows)
		return
	}
	regOf := map[string]arch.Reg{}
	for r := 0; r < 128; r++ {
		regOf[readelf.X86_64RegName(r)] = arch.Reg(r)
	}
	for i, want := range re.Rows {
		got := rows[i]
		if got.Loc != want.Loc {
			t.Errorf("FDE %#x row %d: loc %#x, readelf %#x", fde.Offset, i, got.Loc, want.Loc)
		}
		for col, w := range want.Cols {
			var g string
			switch col {
			case "CFA":
				g = got.CFA.Format(x86Name)
			case "ra":
				g = got.Rule(fde.CIE.RA).Format(x86Name)
			default:
				reg, ok := regOf[col]
				if !ok {
					t.Fatalf("unknown readelf column %q", col)
				}
				g = got.Rule(reg).Format(x86Name)
			}
			if g != w {
				t.Errorf("FDE %#x row %d (loc %#x) column %s: %q, readelf %q", fde.Offset, i, got.Loc, col, g, w)
			}
		}
	}
}

// compareWithReadelf parses all FDEs of sec and compares those readelf
// printed for section name.
func compareWithReadelf(t *testing.T, sec *Section, text, name string, limit int) int {
	t.Helper()
	entries, err := readelf.ParseFramesInterp(text)
	if err != nil {
		t.Fatal(err)
	}
	byOff := map[uint64]readelf.InterpEntry{}
	for _, e := range entries {
		if e.Section == name && !e.IsCIE {
			byOff[e.Offset] = e
		}
	}
	n := 0
	err = sec.Entries(func(c *ParsedCIE, f *ParsedFDE) bool {
		if f == nil {
			return true
		}
		re, ok := byOff[f.Offset]
		if !ok {
			t.Errorf("FDE %#x not printed by readelf", f.Offset)
			return true
		}
		if re.PCBegin != f.Start || re.PCEnd != f.Start+f.Size {
			t.Errorf("FDE %#x: [%#x, %#x), readelf [%#x, %#x)", f.Offset, f.Start, f.Start+f.Size, re.PCBegin, re.PCEnd)
		}
		if re.CIEOffset != f.CIE.Offset {
			t.Errorf("FDE %#x: CIE %#x, readelf %#x", f.Offset, f.CIE.Offset, re.CIEOffset)
		}
		compareRows(t, f, re)
		n++
		return limit <= 0 || n < limit
	})
	if err != nil {
		t.Fatalf("Entries: %v", err)
	}
	return n
}
