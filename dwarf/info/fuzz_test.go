package info

import (
	"debug/dwarf"
	"errors"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
)

func fuzzSeeds(f *testing.F) {
	for _, enc := range encodings() {
		u := sampleUnit(enc, "f")
		info, abbrev, err := Encode([]*Unit{u}, nil) // inline strings
		if err != nil {
			f.Fatal(err)
		}
		f.Add(abbrev, info)
	}
	abbrev, info, _ := indexedSample()
	f.Add(abbrev, info)
}

// FuzzInfo decodes every DIE of arbitrary .debug_abbrev and .debug_info
// bytes (the other sections alias .debug_info): no panic, and errors are
// FormatErrors.
func FuzzInfo(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, abbrev, info []byte) {
		sec := Sections{Info: info, Abbrev: abbrev, Str: info, LineStr: info, StrOffsets: info, Addr: info, RngLists: info, LocLists: info}
		d, err := New(sec)
		if err != nil {
			var fe *edwarf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("New: %T %v", err, err)
			}
			return
		}
		r := d.Reader()
		for n := 0; ; n++ {
			e, err := r.Next()
			if err != nil {
				var fe *edwarf.FormatError
				if !errors.As(err, &fe) {
					t.Fatalf("Next: %T %v", err, err)
				}
				return
			}
			if e == nil {
				return
			}
			if n%3 == 0 {
				r.SkipChildren()
			}
		}
	})
}

// FuzzDiffGo compares the entries our reader and Go's debug/dwarf decode
// where both accept the input: offsets, tags, attributes and values.
func FuzzDiffGo(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, abbrev, info []byte) {
		d, err := New(Sections{Info: info, Abbrev: abbrev, Str: info})
		if err != nil {
			return
		}
		gd, err := goNew(abbrev, info)
		if err != nil {
			return
		}
		if msg := diffGo(d, gd, false); msg != "" {
			t.Fatal(msg)
		}
	})
}

func goNew(abbrev, info []byte) (d *dwarf.Data, err error) {
	defer func() {
		if recover() != nil {
			d, err = nil, errPanic
		}
	}()
	return dwarf.New(abbrev, nil, nil, info, nil, nil, nil, info)
}

type panicErr struct{}

func (panicErr) Error() string { return "debug/dwarf panicked" }

var errPanic error = panicErr{}
