package symbolize_test

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/symbolize"
)

// TestAttrsVsGo decodes the attributes symbolization reads (pc ranges,
// names, references, call sites, line program) from every unit root,
// subprogram and inlined subroutine of gcc (32- and 64-bit DWARF), clang
// and Go binaries, and
// compares them with Go's debug/dwarf: both readers must agree on every
// value, so a form read with a wrong size or class shows up as a
// difference or a decoding error.
func TestAttrsVsGo(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(t *testing.T) string
	}{
		{"gcc-dwarf5", func(t *testing.T) string { return buildC(t, tooltest.Require(t, "gcc"), "-O2", "-g", "-gdwarf-5") }},
		{"gcc-dwarf4", func(t *testing.T) string { return buildC(t, tooltest.Require(t, "gcc"), "-O2", "-g", "-gdwarf-4") }},
		{"gcc-dwarf5-64", func(t *testing.T) string {
			return buildC(t, tooltest.Require(t, "gcc"), "-O2", "-g", "-gdwarf-5", "-gdwarf64")
		}},
		{"clang-dwarf5", func(t *testing.T) string {
			return buildC(t, tooltest.Require(t, "clang-14", "clang"), "-O2", "-g", "-gdwarf-5")
		}},
		{"clang-dwarf4", func(t *testing.T) string {
			return buildC(t, tooltest.Require(t, "clang-14", "clang"), "-O2", "-g", "-gdwarf-4")
		}},
		{"go", func(t *testing.T) string { return buildGo(t) }},
		// Inlined calls at lines and columns of 2 and 4 bytes (gcc's
		// DW_FORM_data2 and data4 call_line and call_column; DWARF 4,
		// where DWARF 5 has implicit constants): the in-place loads of
		// every size.
		{"gcc-wide-calls", func(t *testing.T) string { return tooltest.GCC(t, wideCallsSrc, "-O2", "-g", "-gdwarf-4") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := elf.Open(c.build(t))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			gd, err := f.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			theirs := goDIEs(t, gd)
			// Both of readAttrs' paths: in place for DIEs of fixed size,
			// and form by form.
			for _, slow := range []bool{false, true} {
				ours, fixed, err := symbolize.ReadDIEsPath(func(name string) ([]byte, error) {
					if s := f.Section(name); s != nil {
						return s.Data()
					}
					return nil, nil
				}, slow)
				if err != nil {
					t.Fatal(err)
				}
				if c.name != "go" && fixed == 0 {
					t.Errorf("no subroutine abbreviation is read in place")
				}
				compareDIEs(t, c.name, slow, ours, theirs)
			}
		})
	}
}

// wideCallsSrc inlines mix at line 300 (column 300) and line 70000.
var wideCallsSrc = "static inline __attribute__((always_inline)) int mix(int x, int k) { return x * k + 3; }\n" +
	"#line 300\n" +
	"int f(int x) { int s = 0; for (int i = 0; i < x; i++) s +=" + strings.Repeat(" ", 250) + "mix(i, x); return s; }\n" +
	"#line 70000\n" +
	"int g(int x) { return mix(x, 7) ^ f(x); }\n" +
	"int main(int c, char **v) { (void)v; return g(c); }\n"

// compareDIEs compares the DIEs ReadDIEsPath read (slow: form by form)
// with debug/dwarf's.
func compareDIEs(t *testing.T, name string, slow bool, ours, theirs []symbolize.DIEAttrs) {
	t.Helper()
	{
		{
			if len(ours) != len(theirs) || len(ours) < 10 {
				t.Fatalf("%d DIEs read, debug/dwarf %d", len(ours), len(theirs))
			}
			bad, inlined := 0, 0
			for i := range ours {
				if ours[i].CallLine != 0 {
					inlined++
				}
				if ours[i] != theirs[i] {
					if bad++; bad <= 5 {
						t.Errorf("slow=%v: DIE %d:\n\tours        %+v\n\tdebug/dwarf %+v", slow, i, ours[i], theirs[i])
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d DIEs differ", bad, len(ours))
			}
			if name != "go" && inlined == 0 {
				t.Errorf("no inlined subroutine with a call site among %d DIEs", len(ours))
			}
			t.Logf("slow=%v: %d DIEs agree (%d inlined call sites)", slow, len(ours), inlined)
		}
	}
}

// goDIEs is ReadDIEs done with debug/dwarf.
func goDIEs(t *testing.T, gd *dwarf.Data) []symbolize.DIEAttrs {
	var out []symbolize.DIEAttrs
	r := gd.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			return out
		}
		root := e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit || e.Tag == dwarf.TagSkeletonUnit
		if !root && e.Tag != dwarf.TagSubprogram && e.Tag != dwarf.TagInlinedSubroutine {
			continue
		}
		a := symbolize.DIEAttrs{Spec: ^uint64(0), Origin: ^uint64(0)}
		if root {
			a.Offset, a.Root = uint64(e.Offset), true
		}
		for _, f := range e.Field {
			switch f.Attr {
			case dwarf.AttrLowpc:
				a.LowPC, a.HasLow = f.Val.(uint64)
			case dwarf.AttrHighpc:
				switch v := f.Val.(type) {
				case uint64:
					a.HighPC, a.HasHigh = v, true
				case int64:
					a.HighPC, a.HasHigh, a.HighIsLen = uint64(v), true, true
				}
			case dwarf.AttrRanges:
				switch v := f.Val.(type) {
				case int64:
					a.Ranges, a.HasRanges = uint64(v), true
				case uint64:
					a.Ranges, a.HasRanges = v, true
				}
			case dwarf.AttrStmtList:
				if v, ok := f.Val.(int64); ok {
					a.StmtList, a.HasStmt = uint64(v), true
				}
			case dwarf.AttrName:
				a.Name, _ = f.Val.(string)
			case dwarf.AttrLinkageName, 0x2007: // DW_AT_MIPS_linkage_name
				if s, ok := f.Val.(string); ok {
					a.Linkage = s
				}
			case dwarf.AttrCompDir:
				a.CompDir, _ = f.Val.(string)
			case dwarf.AttrSpecification:
				if v, ok := f.Val.(dwarf.Offset); ok {
					a.Spec = uint64(v)
				}
			case dwarf.AttrAbstractOrigin:
				if v, ok := f.Val.(dwarf.Offset); ok {
					a.Origin = uint64(v)
				}
			case dwarf.AttrCallFile:
				a.CallFile = asUint(f.Val)
			case dwarf.AttrCallLine:
				a.CallLine = asUint(f.Val)
			case dwarf.AttrCallColumn:
				a.CallCol = asUint(f.Val)
			}
		}
		out = append(out, a)
	}
}

func asUint(v any) uint64 {
	switch v := v.(type) {
	case int64:
		return uint64(v)
	case uint64:
		return v
	}
	panic(fmt.Sprintf("constant of type %T", v))
}
