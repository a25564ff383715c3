package main

import (
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestDumpReadelf holds dump's headers, program headers with their
// section to segment mapping, sections and symbols (its -json form)
// against what binutils' readelf -W -h -l -S -s prints for the same
// files: a PIE executable, a shared library, a relocatable object built
// with gcc -c, and ELF32 big-endian objects from Go's debug/elf test data.
// Values are compared, not layout; the machine is held against debug/elf.
func TestDumpReadelf(t *testing.T) {
	readelf := tooltest.Require(t, "readelf")
	gcc := tooltest.Require(t, "gcc")
	dir := t.TempDir()
	obj := filepath.Join(dir, "t.o")
	src := filepath.Join(dir, "t.c")
	writeSource(t, src, "static int s(int x) { return x * 3; }\nint g;\nint f(int y) { return s(y) + g; }\n__thread int tl;\n")
	if out, err := exec.Command(gcc, "-g", "-O1", "-c", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -c: %v\n%s", err, out)
	}
	files := []string{"/bin/ls", "/usr/lib/x86_64-linux-gnu/libc.so.6", obj}
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libz.so.1"); err == nil {
		files = append(files, "/usr/lib/x86_64-linux-gnu/libz.so.1")
	}
	var td string
	if root, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		td = filepath.Join(strings.TrimSpace(string(root)), "src/debug/elf/testdata")
	}
	for _, n := range []string{"go-relocation-test-gcc540-mips.obj", "go-relocation-test-gcc5-ppc.obj", "gcc-386-freebsd-exec", "go-relocation-test-gcc531-s390x.obj"} {
		if _, err := os.Stat(filepath.Join(td, n)); err == nil {
			files = append(files, filepath.Join(td, n))
		} else {
			t.Logf("no %s: %v", n, err)
		}
	}
	if core := unzipCore(t, td, dir); core != "" {
		files = append(files, core)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			code, out, errOut := runCLI(t, "dump", "-json", "-headers", "-sections", "-symbols", path)
			if code != 0 {
				t.Fatalf("dump: exit %d: %s", code, errOut)
			}
			var doc dumpDoc
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			ref, err := exec.Command(readelf, "-W", "-h", "-l", "-S", "-s", path).Output()
			if err != nil {
				t.Fatalf("readelf: %v", err)
			}
			ef, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ef.Close()
			if doc.Header == nil || doc.Header.Machine != ef.Machine.String() {
				t.Errorf("machine %+v, debug/elf says %v", doc.Header, ef.Machine)
			}
			compareReadelf(t, doc, string(ref))
			comparePrograms(t, doc, string(ref))
		})
	}
}

// comparePrograms compares the program headers and the section to
// segment mapping with readelf -l's.
func comparePrograms(t *testing.T, doc dumpDoc, text string) {
	t.Helper()
	var want, got []string
	inProgs, inMap := false, false
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, "Program Headers:"):
			inProgs = true
		case strings.HasPrefix(l, " Section to Segment mapping:"):
			inProgs, inMap = false, true
		case l == "" || strings.HasPrefix(l, "Section Headers:") || strings.HasPrefix(l, "Symbol table"):
			inProgs, inMap = false, false
		case inProgs && len(f) >= 7 && strings.HasPrefix(f[1], "0x"):
			want = append(want, strings.Join([]string{f[0], trimZeros(f[1]), trimZeros(f[2]), trimZeros(f[3]), trimZeros(f[4]), trimZeros(f[5]),
				strings.Join(f[6:len(f)-1], ""), trimZeros(f[len(f)-1])}, " "))
		case inMap && len(f) >= 1 && len(f[0]) == 2 && isHex(f[0]):
			want = append(want, "map "+strings.Join(f[1:], " "))
		}
	}
	for _, p := range doc.Programs {
		got = append(got, strings.Join([]string{p.Type, strconv.FormatUint(p.Offset, 16), strconv.FormatUint(p.VirtAddr, 16),
			strconv.FormatUint(p.PhysAddr, 16), strconv.FormatUint(p.FileSize, 16), strconv.FormatUint(p.MemSize, 16),
			strings.ReplaceAll(p.Flags, " ", ""), strconv.FormatUint(p.Align, 16)}, " "))
	}
	for _, p := range doc.Programs {
		if doc.Header.SectionHeaders > 0 { // readelf prints no mapping without sections
			got = append(got, "map "+strings.Join(p.Sections, " "))
		}
	}
	diffLines(t, "program headers", strings.Join(got, "\n"), strings.Join(want, "\n"))
}

// compareReadelf compares the header fields, every section header and
// every symbol of doc with readelf's text.
func compareReadelf(t *testing.T, doc dumpDoc, text string) {
	t.Helper()
	h := doc.Header
	hdr := map[string]string{}
	var secs [][]string
	tables := map[string][][]string{}
	var table string
	wide := 16
	if h.Class == "ELF32" {
		wide = 8
	}
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "  ") && strings.Contains(l, ":") && !strings.HasPrefix(strings.TrimSpace(l), "[") && table == "" && len(secs) == 0:
			k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
			if _, dup := hdr[k]; !dup {
				hdr[k] = strings.TrimSpace(v)
			} else {
				hdr["e_"+k] = strings.TrimSpace(v)
			}
		case secLine.MatchString(l) && table == "":
			_, rest, _ := strings.Cut(l, "]")
			secs = append(secs, sectionFields(t, rest, wide))
		case strings.HasPrefix(l, "Symbol table '"):
			table = strings.Split(l, "'")[1]
		case table != "" && strings.Contains(l, ":") && !strings.Contains(l, "Num:"):
			num, rest, _ := strings.Cut(strings.TrimSpace(l), ":")
			f := strings.Fields(rest)
			if len(f) < 6 {
				t.Errorf("readelf symbol line %q", l)
				continue
			}
			// Vis may carry an annotation in brackets; the name is what
			// follows Ndx.
			ndx, namef := f[5], f[6:]
			if strings.HasPrefix(ndx, "[") { // readelf's annotation of st_other
				for len(namef) > 0 && !strings.HasSuffix(ndx, "]") {
					ndx, namef = namef[0], namef[1:]
				}
				if len(namef) > 0 {
					ndx, namef = namef[0], namef[1:]
				}
			}
			tables[table] = append(tables[table], []string{num, f[0], f[1], f[2], f[3], f[4], ndx, strings.Join(namef, " ")})
		}
	}
	num := func(s string) uint64 {
		s = strings.TrimSuffix(strings.Fields(s)[0], ",")
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), map[bool]int{true: 16, false: 10}[strings.HasPrefix(s, "0x")], 64)
		if err != nil {
			t.Errorf("readelf value %q: %v", s, err)
		}
		return v
	}
	checks := []struct {
		key  string
		got  uint64
		name string
	}{
		{"Entry point address", h.Entry, "Entry"}, {"Start of program headers", h.ProgramHeaderStart, "ProgramHeaderStart"},
		{"Start of section headers", h.SectionHeaderStart, "SectionHeaderStart"}, {"Flags", uint64(h.Flags), "Flags"},
		{"Size of this header", uint64(h.HeaderSize), "HeaderSize"}, {"Size of program headers", uint64(h.ProgramHeaderSize), "ProgramHeaderSize"},
		{"Number of program headers", uint64(h.ProgramHeaders), "ProgramHeaders"}, {"Size of section headers", uint64(h.SectionHeaderSize), "SectionHeaderSize"},
		{"Number of section headers", uint64(h.SectionHeaders), "SectionHeaders"}, {"Section header string table index", uint64(h.SectionNames), "SectionNames"},
		{"e_Version", uint64(h.Version), "Version"}, {"ABI Version", uint64(h.ABIVersion), "ABIVersion"},
	}
	for _, c := range checks {
		if v, ok := hdr[c.key]; !ok {
			t.Errorf("readelf printed no %q", c.key)
		} else if num(v) != c.got {
			t.Errorf("%s = %#x, readelf %q says %s", c.name, c.got, c.key, v)
		}
	}
	if hdr["Class"] != h.Class || !strings.HasSuffix(hdr["Data"], h.Data) {
		t.Errorf("class %s, data %s; readelf %s, %s", h.Class, h.Data, hdr["Class"], hdr["Data"])
	}
	if typ := strings.Fields(hdr["Type"]); len(typ) == 0 || "ET_"+typ[0] != h.Type {
		t.Errorf("type %s, readelf %q", h.Type, hdr["Type"])
	}
	if len(secs) != len(doc.Sections) {
		t.Fatalf("%d sections, readelf %d", len(doc.Sections), len(secs))
	}
	for i, r := range secs {
		s := doc.Sections[i]
		got := []string{s.Name, s.Type, hexPad(s.Address, wide), hexPad(s.Offset, 6), hexPad(s.Size, 6), hexPad(s.EntSize, 2), s.Flags,
			strconv.Itoa(int(s.Link)), strconv.Itoa(int(s.Info)), strconv.FormatUint(s.Alignment, 10)}
		if strings.Join(got, "|") != strings.Join(r, "|") {
			t.Errorf("section %d:\n got     %q\n readelf %q", i, got, r)
		}
	}
	var nsyms int
	for _, st := range doc.SymbolTables {
		ref := tables[st.Name]
		if len(ref) != len(st.Symbols) {
			t.Errorf("%s: %d symbols, readelf %d", st.Name, len(st.Symbols), len(ref))
			continue
		}
		for i, s := range st.Symbols {
			nsyms++
			size := strconv.FormatUint(s.Size, 10)
			if r := ref[i][2]; strings.HasPrefix(r, "0x") {
				size = "0x" + strconv.FormatUint(s.Size, 16)
			}
			got := []string{strconv.Itoa(s.Num), hexPad(s.Value, wide), size, s.Type, s.Bind, s.Visibility, s.Ndx, s.Name + s.Version}
			if strings.Join(got, "|") != strings.Join(ref[i], "|") {
				t.Errorf("%s symbol %d:\n got     %q\n readelf %q", st.Name, i, got, ref[i])
			}
		}
	}
	if len(tables) != len(doc.SymbolTables) {
		t.Errorf("%d symbol tables, readelf %d", len(doc.SymbolTables), len(tables))
	}
	t.Logf("%d sections, %d symbols agree with readelf", len(secs), nsyms)
}

var secLine = regexp.MustCompile(`^\s*\[\s*\d+\]`)

func hexPad(v uint64, n int) string {
	s := strconv.FormatUint(v, 16)
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// sectionFields splits what follows "[Nr]" in readelf -S -W: name, type,
// address, offset, size, entry size, flags, link, info, alignment. The
// address column (wide hexadecimal digits) anchors the split, for names
// may be empty and flags may be absent.
func sectionFields(t *testing.T, rest string, wide int) []string {
	f := strings.Fields(rest)
	for k := 1; k+3 < len(f); k++ {
		if len(f[k]) != wide || !isHex(f[k]) || !isHex(f[k+1]) || !isHex(f[k+2]) || !isHex(f[k+3]) {
			continue
		}
		name := strings.Join(f[:k-1], " ")
		tail := f[k+4:]
		flags := ""
		if len(tail) == 4 {
			flags, tail = tail[0], tail[1:]
		}
		if len(tail) != 3 {
			break
		}
		return append([]string{name, f[k-1], f[k], f[k+1], f[k+2], f[k+3], flags}, tail...)
	}
	t.Errorf("readelf section line %q", rest)
	return nil
}

func isHex(s string) bool {
	_, err := strconv.ParseUint(s, 16, 64)
	return err == nil
}

// TestDumpReadelfTables holds dump's relocations, dynamic section and
// notes (-json -relocs -dynamic -notes) against readelf -W -r -d -n on the
// files of TestDumpReadelf and a core file. Relocation symbol names are compared without
// the version readelf appends (dump's relocation view names symbols
// unversioned).
func TestDumpReadelfTables(t *testing.T) {
	readelf := tooltest.Require(t, "readelf")
	gcc := tooltest.Require(t, "gcc")
	dir := t.TempDir()
	obj, src := filepath.Join(dir, "t.o"), filepath.Join(dir, "t.c")
	writeSource(t, src, "extern int ext(int);\nstatic int s(int x) { return ext(x) * 3; }\nint g;\nint f(int y) { return s(y) + g; }\n")
	if out, err := exec.Command(gcc, "-g", "-O1", "-c", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -c: %v\n%s", err, out)
	}
	files := []string{"/bin/ls", "/usr/lib/x86_64-linux-gnu/libc.so.6", obj}
	if root, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		td := filepath.Join(strings.TrimSpace(string(root)), "src/debug/elf/testdata")
		files = append(files, filepath.Join(td, "go-relocation-test-gcc540-mips.obj"), filepath.Join(td, "gcc-386-freebsd-exec"))
		if core := unzipCore(t, td, dir); core != "" {
			files = append(files, core)
		}
	}
	for _, path := range files {
		if _, err := os.Stat(path); err != nil {
			t.Logf("no %s", path)
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			code, out, errOut := runCLI(t, "dump", "-json", "-relocs", "-dynamic", "-notes", path)
			if code != 0 {
				t.Fatalf("dump: exit %d: %s", code, errOut)
			}
			var doc dumpDoc
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			ref, err := exec.Command(readelf, "-W", "-r", "-d", "-n", path).Output()
			if err != nil {
				t.Fatalf("readelf: %v", err)
			}
			var wantRel, wantDyn, wantNotes []string
			inRel, inDyn := false, false
			lines := strings.Split(string(ref), "\n")
			for _, l := range lines {
				f := strings.Fields(l)
				switch {
				case strings.HasPrefix(l, "Relocation section '"):
					inRel, inDyn = true, false
					wantRel = append(wantRel, "section "+strings.Split(l, "'")[1])
				case strings.HasPrefix(l, "Dynamic section at"):
					inRel, inDyn = false, true
				case strings.HasPrefix(l, "Displaying notes") || l == "":
					inRel, inDyn = false, false
				case inRel && len(f) == 1 && isHex(f[0]): // an SHT_RELR place
					wantRel = append(wantRel, "relr "+trimZeros(f[0]))
				case inRel && len(f) >= 3 && isHex(f[0]) && isHex(f[1]):
					e := []string{trimZeros(f[0]), trimZeros(f[1]), f[2]}
					switch {
					case len(f) == 4: // no symbol: the addend
						e = append(e, "", "+"+trimZeros(f[3]))
					case len(f) >= 5:
						name, _, _ := strings.Cut(f[4], "@")
						e = append(e, name)
						if len(f) >= 7 {
							e = append(e, f[5]+trimZeros(f[6]))
						}
					}
					wantRel = append(wantRel, strings.Join(e, " "))
				case inDyn && len(f) >= 2 && strings.HasPrefix(f[0], "0x") && strings.HasPrefix(f[1], "("):
					wantDyn = append(wantDyn, strings.Trim(f[1], "()"))
				case len(f) >= 3 && strings.HasPrefix(f[1], "0x") && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") &&
					strings.Contains(string(ref[:strings.Index(string(ref), l)]), "Displaying notes"):
					// Owner, size TAB type [(what)] TAB description.
					cols := strings.Split(l, "\t")
					typ := ""
					if len(cols) > 1 {
						typ = strings.Fields(cols[1] + " x")[0]
					}
					if strings.HasPrefix(typ, "0x") || typ == "Unknown" || typ == "x" {
						typ = ""
					}
					w := fmt.Sprintf("%s %s %s", f[0], trimZeros(strings.Fields(cols[0])[1]), typ)
					if (typ == "NT_GNU_BUILD_ID" || typ == "NT_GNU_ABI_TAG") && len(cols) > 2 {
						w += " " + strings.TrimSpace(cols[2])
					}
					wantNotes = append(wantNotes, w)
				}
			}
			var gotRel, gotDyn, gotNotes []string
			for _, r := range doc.Relocations {
				gotRel = append(gotRel, "section "+r.Name)
				for _, o := range r.RelrOffsets {
					gotRel = append(gotRel, "relr "+strconv.FormatUint(o, 16))
				}
				for _, e := range r.Entries {
					g := []string{strconv.FormatUint(e.Offset, 16), strconv.FormatUint(e.Info, 16), e.Type}
					switch {
					case e.SymbolIndex == 0 && e.HasAddend:
						g = append(g, "", "+"+strconv.FormatUint(uint64(e.Addend), 16))
					case e.SymbolIndex != 0:
						g = append(g, e.SymName)
						if e.HasAddend {
							if e.Addend < 0 {
								g = append(g, "-"+strconv.FormatUint(uint64(-e.Addend), 16))
							} else {
								g = append(g, "+"+strconv.FormatUint(uint64(e.Addend), 16))
							}
						}
					}
					gotRel = append(gotRel, strings.Join(g, " "))
				}
			}
			for _, d := range doc.Dynamic {
				gotDyn = append(gotDyn, d.Tag)
			}
			for _, n := range doc.Notes {
				typ := n.Type
				if strings.HasPrefix(typ, "0x") {
					typ = ""
				}
				g := fmt.Sprintf("%s %x %s", n.Owner, n.DataSize, typ)
				if typ == "NT_GNU_BUILD_ID" || typ == "NT_GNU_ABI_TAG" {
					g += " " + n.Description
				}
				gotNotes = append(gotNotes, g)
			}
			diffLines(t, "relocations", strings.Join(gotRel, "\n"), strings.Join(wantRel, "\n"))
			diffLines(t, "dynamic", strings.Join(gotDyn, "\n"), strings.Join(wantDyn, "\n"))
			diffLines(t, "notes", strings.Join(gotNotes, "\n"), strings.Join(wantNotes, "\n"))
			t.Logf("%d relocation lines, %d dynamic entries, %d notes agree with readelf", len(gotRel), len(gotDyn), len(gotNotes))
		})
	}
}

func trimZeros(s string) string {
	s = strings.TrimLeft(strings.TrimPrefix(s, "0x"), "0")
	if s == "" {
		return "0"
	}
	return s
}

// unzipCore writes Go's debug/elf test core file (notes in a PT_NOTE
// segment, no section table) into dir and returns its path, or "" when
// there is none.
func unzipCore(t *testing.T, td, dir string) string {
	t.Helper()
	z, err := os.Open(filepath.Join(td, "hello-world-core.gz"))
	if err != nil {
		t.Logf("no core file: %v", err)
		return ""
	}
	defer z.Close()
	zr, err := gzip.NewReader(z)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	core := filepath.Join(dir, "core")
	if err := os.WriteFile(core, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return core
}
