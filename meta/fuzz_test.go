package meta

import (
	"errors"
	"reflect"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
)

// FuzzTable reads arbitrary bytes as a table section and a string section:
// NewTable, Lookup at many addresses, At, Describe and Position never panic, errors
// are FormatErrors (or ErrNotFound), and a successful Lookup's answer
// covers the address. When the records are sorted, Lookup's record is the
// last one starting at or before the address (flatFind, a scan of every
// record), or, only when the start index disagrees with the records, a
// FormatError naming it.
func FuzzTable(f *testing.F) {
	small := []Proc{
		{Name: "a", Start: 0x1000, Size: 0x10},
		{Name: "b", Start: 0x1020, Size: 0x200, Required: 1, Optional: 1, Args: []string{"x", "y"},
			Defaults: []string{"3"}, Doc: "d", Props: []Prop{{"p", "v"}}, LineUnit: 0x40, LineSeq: 0x70, HasLineSeq: true},
	}
	rows := genProcs(6)
	lsec, prog := genLines(f, rows)
	withRows(f, rows, lsec, prog)
	for _, ps := range [][]Proc{small, genProcs(5), genProcs(40), rows, genProcs(200)} {
		sec, err := Encode(ps)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(sec, []byte(nil), uint64(0x1000))
		st := dwarf.NewStrTab()
		sec, err = EncodeWith(ps, st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(sec, st.Bytes(), uint64(0x1020))
	}
	f.Fuzz(func(t *testing.T, sec, strs []byte, addr uint64) {
		tab, err := NewTable(sec, strs)
		if err != nil {
			var fe *dwarf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("NewTable error %T %v", err, err)
			}
			return
		}
		check := func(e Entry, err error, a uint64, lookup bool) {
			if err != nil {
				var fe *dwarf.FormatError
				if !errors.As(err, &fe) && !errors.Is(err, ErrNotFound) {
					t.Fatalf("error %T %v", err, err)
				}
				return
			}
			if lookup && (a < e.Start || a-e.Start >= e.Size) {
				t.Fatalf("Lookup(%#x) = [%#x, +%#x)", a, e.Start, e.Size)
			}
			if e.HasPositions {
				if _, _, err := tab.Positions(e); err != nil {
					var fe *dwarf.FormatError
					if !errors.As(err, &fe) {
						t.Fatalf("Positions error %T %v", err, err)
					}
				}
				for _, pa := range []uint64{a, e.Start, e.Start + e.Size - 1} {
					if _, err := tab.Position(e, pa); err != nil {
						var fe *dwarf.FormatError
						if !errors.As(err, &fe) && err != ErrNotFound {
							t.Fatalf("Position error %T %v", err, err)
						}
					}
				}
			}
			p, err := tab.Describe(e)
			if err != nil {
				var fe *dwarf.FormatError
				if !errors.As(err, &fe) {
					t.Fatalf("Describe error %T %v", err, err)
				}
				return
			}
			if p.Start != e.Start || p.Size != e.Size || p.Name != string(e.NameBytes) || len(p.Args) != p.Required+p.Optional {
				t.Fatalf("Describe %+v disagrees with %+v", p, e)
			}
		}
		addrs := []uint64{addr, 0, ^uint64(0), addr + 1, addr - 1}
		for i := 0; i < tab.Len() && i < 64; i++ {
			e, err := tab.At(i)
			check(e, err, 0, false)
			if err == nil {
				addrs = append(addrs, e.Start, e.Start+e.Size-1, e.Start+e.Size)
			}
		}
		// The oracle of the bisections: on sorted records, the record
		// flatFind finds, whatever the start index holds (it may make
		// Lookup fail, only when it disagrees with the records).
		sorted, agrees := true, true
		for i := 1; i < tab.n && sorted; i++ {
			sorted = tab.startAt(i-1) < tab.startAt(i)
		}
		for j := 0; j < tab.k; j++ {
			agrees = agrees && le(sec[HeaderSize+j*tab.ss:], tab.ss) == le(sec[tab.recOff+(j+1)*IndexStride*tab.rec:], tab.ss)
		}
		for i := 0; i < tab.k && i < 64; i++ {
			s := tab.base + le(sec[HeaderSize+i*tab.ss:], tab.ss)
			addrs = append(addrs, s, s-1)
		}
		for _, a := range addrs {
			e, err := tab.Lookup(a)
			check(e, err, a, true)
			// LookupHead: Lookup's answer without the name, or its
			// error when that is not the name's.
			h, herr := tab.LookupHead(a)
			var fe *dwarf.FormatError
			if err == nil || !errors.As(err, &fe) || fe.Field != "name" {
				e.NameBytes = nil
				if (herr == nil) != (err == nil) || (err != nil && herr.Error() != err.Error()) || !reflect.DeepEqual(h, e) {
					t.Fatalf("LookupHead(%#x) = %+v, %v; Lookup %+v, %v", a, h, herr, e, err)
				}
			}
			if !sorted {
				continue
			}
			i, ferr := tab.find(a, nil)
			switch want := flatFind(tab, a); {
			case errors.As(ferr, &fe):
				if agrees || fe.Field != "start index" {
					t.Fatalf("find(%#x) = %v; want record %d (index agrees: %v)", a, ferr, want, agrees)
				}
			case want < 0:
				if ferr != ErrNotFound {
					t.Fatalf("find(%#x) = %d, %v; want ErrNotFound", a, i, ferr)
				}
			case ferr != nil || i != want:
				t.Fatalf("find(%#x) = %d, %v; want record %d", a, i, ferr, want)
			}
		}
	})
}
