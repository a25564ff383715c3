package elfimage_test

import (
	"bytes"
	"context"
	"debug/dwarf"
	"debug/elf"
	enchex "encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/lang/scheme"
)

// splitDemo writes the demo program's image into a test directory
// whole (demo.elf) and split by WriteFile with LinkOptions.DebugFile
// (demo.stripped.elf and its debug file demo.debug beside it), and
// returns the directory.
func splitDemo(t *testing.T, opts elfimage.LinkOptions) string {
	t.Helper()
	full := writeDemo(t, opts)
	dir := filepath.Dir(full)
	m, err := scheme.Compile(filepath.Join(dir, scheme.DemoFile), scheme.DemoSource)
	if err != nil {
		t.Fatal(err)
	}
	opts.DebugFile = filepath.Join(dir, "demo.debug")
	if err := elfimage.WriteFile(filepath.Join(dir, "demo.stripped.elf"), m, opts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runDemo runs the demo's main in img and returns what it printed.
func runDemo(t *testing.T, img *elfimage.Image) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := scheme.Run(img, scheme.RunOptions{Stdout: f}); err != nil {
		t.Fatalf("run %s: %v", img.Path(), err)
	}
	f.Seek(0, io.SeekStart)
	b, _ := io.ReadAll(f)
	return string(b)
}

func openImage(t *testing.T, path string, opts *elfimage.LoadOptions) *elfimage.Image {
	t.Helper()
	img, err := elfimage.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { img.Close() })
	return img
}

// noDirs looks for debug files beside the image only, never in the
// system's /usr/lib/debug.
var noDirs = &elfimage.LoadOptions{DebugFiles: &debugfile.Finder{DebugDirs: []string{}}}

// answers is what the debug queries say at every address of every
// procedure, as text: the oracle a stripped image with its debug file
// must match exactly.
func answers(t *testing.T, img *elfimage.Image, procs []elfimage.Procedure) []string {
	t.Helper()
	var out []string
	for _, p := range procs {
		for a := p.Start; a < p.Start+p.Size; a++ {
			pos, err1 := img.PositionAt(a)
			pr, err2 := img.Procedure(a)
			sym, err3 := img.ProcedureAt(a)
			locals, err4 := img.Locals(a)
			sub, err5 := img.SubprogramAt(a)
			var ls []string
			for _, l := range locals {
				ls = append(ls, fmt.Sprintf("%s %v %d %x %v", l.Name, l.Param, l.Depth, l.Location, l.Type))
			}
			line := fmt.Sprintf("%#x: %v %v | %+v %v | %+v %v | %q %v | %s %x %d %v", a, pos, err1, pr, err2, sym, err3, ls, err4, sub.Name, sub.FrameBase, len(sub.Params), err5)
			out = append(out, strings.ReplaceAll(line, img.Path(), "IMAGE"))
		}
	}
	return out
}

// TestStripSplit checks Strip's two files against the whole image: the
// stripped image has the image's loaded bytes, build ID and procedure
// table, a .gnu_debuglink with the debug file's name and CRC-32, and no
// symbols or DWARF; it loads, runs, and, with its debug file beside it,
// answers every debug query at every address exactly as the whole image
// does. The debug file holds every loaded section as SHT_NOBITS at its
// address (the note as is), the image's DWARF (as Go's debug/dwarf reads
// it) and symbols.
func TestStripSplit(t *testing.T) {
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			dir := splitDemo(t, e.opts)
			full, _ := os.ReadFile(filepath.Join(dir, "demo.elf"))
			stripped, _ := os.ReadFile(filepath.Join(dir, "demo.stripped.elf"))
			dbg, _ := os.ReadFile(filepath.Join(dir, "demo.debug"))
			// Strip of the whole image gives the same two files.
			s2, d2, err := elfimage.Strip(full, elfimage.StripOptions{DebugLink: "demo.debug"})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(s2, stripped) || !bytes.Equal(d2, dbg) {
				t.Errorf("Strip of the image differs from WriteFile with DebugFile")
			}
			fe, se, de := openELF(t, full), openELF(t, stripped), openELF(t, dbg)
			var loadEnd uint64
			for _, p := range fe.Progs {
				if p.Type == elf.PT_LOAD {
					loadEnd = p.Off + p.Filesz
				}
			}
			phEnd := uint64(64 + len(fe.Progs)*56) // the linker puts them right after the ELF header
			if !bytes.Equal(full[phEnd:loadEnd], stripped[phEnd:loadEnd]) {
				t.Errorf("the loaded segments differ")
			}
			idF, idS, idD := buildIDOf(t, fe), buildIDOf(t, se), buildIDOf(t, de)
			if idF == "" || idS != idF || idD != idF {
				t.Errorf("build IDs: image %s, stripped %s, debug %s", idF, idS, idD)
			}
			for _, name := range []string{".symtab", ".strtab", ".debug_info", ".debug_line", ".debug_abbrev", elfimage.SectionRebase} {
				if se.Section(name) != nil {
					t.Errorf("the stripped image keeps %s", name)
				}
			}
			if se.Section(".elfimage.procs") == nil {
				t.Errorf("the stripped image lost the procedure table")
			}
			link := se.Section(debugfile.SectionDebugLink)
			if link == nil {
				t.Fatal("no .gnu_debuglink")
			}
			lb, _ := link.Data()
			l, err := debugfile.ParseDebuglink(lb, fe.ByteOrder)
			if err != nil || l.Name != "demo.debug" || l.CRC != debugfile.CRC32(dbg) {
				t.Errorf(".gnu_debuglink: %+v %v, want demo.debug %#x", l, err, debugfile.CRC32(dbg))
			}
			for _, s := range fe.Sections {
				if s.Flags&elf.SHF_ALLOC == 0 {
					continue
				}
				d := de.Section(s.Name)
				want := elf.SHT_NOBITS
				if s.Type == elf.SHT_NOTE {
					want = elf.SHT_NOTE
				}
				if d == nil || d.Type != want || d.Addr != s.Addr || d.Size != s.Size || d.Flags != s.Flags {
					t.Errorf("debug file section %s: %+v, want %v at %#x, %#x bytes, %v", s.Name, d, want, s.Addr, s.Size, s.Flags)
				}
			}
			if got, want := lineRows(t, de), lineRows(t, fe); !slices.Equal(got, want) || len(want) == 0 {
				t.Errorf("the debug file's line table (%d rows) differs from the image's (%d rows)", len(got), len(want))
			}
			sf, _ := fe.Symbols()
			sd, err := de.Symbols()
			if err != nil || len(sd) != len(sf) {
				t.Fatalf("debug file symbols: %d, %v; image: %d", len(sd), err, len(sf))
			}
			for i := range sf {
				a, b := sf[i], sd[i]
				if a.Name != b.Name || a.Value != b.Value || a.Size != b.Size || a.Info != b.Info ||
					(a.Section < elf.SHN_LORESERVE && fe.Sections[a.Section].Name != de.Sections[b.Section].Name) {
					t.Errorf("symbol %d: %+v in the debug file, %+v in the image", i, b, a)
				}
			}

			imgF := openImage(t, filepath.Join(dir, "demo.elf"), noDirs)
			imgS := openImage(t, filepath.Join(dir, "demo.stripped.elf"), noDirs)
			if got := runDemo(t, imgS); got != scheme.DemoOutput {
				t.Errorf("stripped image printed %q", got)
			}
			if p, err := imgS.DebugFile(); err != nil || p != filepath.Join(dir, "demo.debug") {
				t.Errorf("DebugFile() = %q, %v", p, err)
			}
			if p, err := imgF.DebugFile(); err != nil || p != "" {
				t.Errorf("DebugFile() of the whole image = %q, %v, want none", p, err)
			}
			if n := imgS.LoadNotes(); len(n) != 0 {
				t.Errorf("notes for the stripped image: %q", n)
			}
			procs, err := imgF.Procedures()
			if err != nil {
				t.Fatal(err)
			}
			want := answers(t, imgF, procs)
			if n := len(slices.DeleteFunc(slices.Clone(want), func(a string) bool { return !strings.Contains(a, scheme.DemoFile+":") })); n < len(want)/2 {
				t.Fatalf("only %d of %d addresses of the whole image have a source position", n, len(want))
			}
			if got := answers(t, imgS, procs); !slices.Equal(got, want) {
				for i := range want {
					if i < len(got) && got[i] != want[i] {
						t.Fatalf("stripped image with its debug file answers\n%s\nthe image answers\n%s", got[i], want[i])
					}
				}
				t.Fatalf("%d answers, want %d", len(got), len(want))
			}
			gotP, err := imgS.Procedures()
			if err != nil || !reflect.DeepEqual(gotP, procs) {
				t.Errorf("Procedures of the stripped image: %v\n%+v\nwant %+v", err, gotP, procs)
			}
		})
	}
}

func buildIDOf(t *testing.T, f *elf.File) string {
	t.Helper()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		t.Fatalf("build ID note: %v", err)
	}
	return enchex.EncodeToString(b[16:])
}

// lineRows returns every row of every line table of f, as text.
func lineRows(t *testing.T, f *elf.File) []string {
	t.Helper()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		lr, err := d.LineReader(e)
		if err != nil || lr == nil {
			continue
		}
		var le dwarf.LineEntry
		for lr.Next(&le) == nil {
			rows = append(rows, fmt.Sprintf("%#x %s:%d:%d", le.Address, le.File.Name, le.Line, le.Column))
		}
	}
	return rows
}

// TestStripLookup checks how a stripped image finds its debug file, and
// what it says when it cannot: by build ID under the debug directories
// of LoadOptions.DebugFiles (image and debug file in different
// directories), through its Remote source, not at all (every query needing DWARF fails
// with an error naming the paths tried, the procedure table still
// answers), a wrong file at the debuglink's place (refused with the
// reason), and DropProcTable (Procedure then needs the debug file).
func TestStripLookup(t *testing.T) {
	dir := splitDemo(t, elfimage.LinkOptions{})
	full := openImage(t, filepath.Join(dir, "demo.elf"), noDirs)
	procs, err := full.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	fib, err := full.ProcedureByName("fib")
	if err != nil {
		t.Fatal(err)
	}
	fibPos, err := full.PositionAt(fib.Start)
	if err != nil {
		t.Fatal(err)
	}
	want := answers(t, full, procs)
	stripped, _ := os.ReadFile(filepath.Join(dir, "demo.stripped.elf"))
	dbg, _ := os.ReadFile(filepath.Join(dir, "demo.debug"))
	id := full.BuildID()

	alone := filepath.Join(t.TempDir(), "alone.elf")
	os.WriteFile(alone, stripped, 0o644)
	debugDir := t.TempDir()
	byID := debugfile.BuildIDPath(debugDir, id)
	os.MkdirAll(filepath.Dir(byID), 0o755)
	os.WriteFile(byID, dbg, 0o644)

	t.Run("build-id", func(t *testing.T) {
		img := openImage(t, alone, &elfimage.LoadOptions{DebugFiles: &debugfile.Finder{DebugDirs: []string{t.TempDir(), debugDir}}})
		if p, err := img.DebugFile(); err != nil || p != byID {
			t.Errorf("DebugFile() = %q, %v, want %s", p, err, byID)
		}
		if got := answers(t, img, procs); !slices.Equal(got, want) {
			t.Errorf("answers differ from the whole image's")
		}
		maps := func() string { b, _ := os.ReadFile("/proc/self/maps"); return string(b) }
		if !strings.Contains(maps(), byID) {
			t.Errorf("the debug file is not mapped while the image is open")
		}
		img.Close()
		if strings.Contains(maps(), byID) {
			t.Errorf("the debug file is still mapped after Close")
		}
	})
	t.Run("Remote", func(t *testing.T) {
		var asked []byte
		img := openImage(t, alone, &elfimage.LoadOptions{DebugFiles: &debugfile.Finder{DebugDirs: []string{}, Remote: func(ctx context.Context, buildID []byte) (string, error) {
			asked = buildID
			return byID, nil
		}}})
		if l, err := img.Locals(fib.Start); err != nil || len(l) == 0 {
			t.Errorf("Locals: %v, %v", l, err)
		}
		if !bytes.Equal(asked, id) {
			t.Errorf("Remote asked for %x, want %x", asked, id)
		}
	})
	t.Run("missing", func(t *testing.T) {
		img := openImage(t, alone, noDirs)
		if p, err := img.Procedure(fib.Start); err != nil || p.Name != "fib" || len(p.Args) != 1 {
			t.Errorf("Procedure without the debug file: %+v, %v", p, err)
		}
		// The procedure table's position index answers PositionAt.
		if got, err := img.PositionAt(fib.Start); err != nil || got != fibPos {
			t.Errorf("PositionAt without the debug file: %v, %v, want %v", got, err, fibPos)
		}
		for what, err := range map[string]error{
			"Locals":      second(img.Locals(fib.Start)),
			"ProcedureAt": second(img.ProcedureAt(fib.Start)), "SubprogramAt": second(img.SubprogramAt(fib.Start)),
		} {
			if !errors.Is(err, elfimage.ErrNoDebugFile) || !errors.Is(err, elfimage.ErrNoSection) || !errors.Is(err, debugfile.ErrNotFound) {
				t.Errorf("%s: %v, want ErrNoDebugFile, ErrNoSection and debugfile.ErrNotFound", what, err)
			}
			msg := fmt.Sprint(err)
			for _, w := range []string{"stripped", enchex.EncodeToString(id), `"demo.debug"`, filepath.Join(filepath.Dir(alone), "demo.debug"), filepath.Join(filepath.Dir(alone), ".debug", "demo.debug")} {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: error %q does not say %q", what, msg, w)
				}
			}
		}
		if _, err := img.DebugFile(); !errors.Is(err, elfimage.ErrNoDebugFile) {
			t.Errorf("DebugFile: %v", err)
		}
		if got := runDemo(t, img); got != scheme.DemoOutput {
			t.Errorf("printed %q", got)
		}
	})
	t.Run("wrong file", func(t *testing.T) {
		other := t.TempDir()
		os.WriteFile(filepath.Join(other, "demo.elf"), stripped, 0o644)
		// A debug file of another image under the debuglink's name.
		m, err := scheme.Compile("other.scm", []byte("(define (main) 1)"))
		if err != nil {
			t.Fatal(err)
		}
		_, od, err := elfimage.LinkSplit(m, elfimage.LinkOptions{DebugFile: "x"})
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(other, "demo.debug"), od, 0o644)
		img := openImage(t, filepath.Join(other, "demo.elf"), noDirs)
		_, err = img.Locals(fib.Start)
		if !errors.Is(err, elfimage.ErrNoDebugFile) || !strings.Contains(fmt.Sprint(err), "its build ID is ") {
			t.Errorf("Locals with another image's debug file: %v", err)
		}
	})
	t.Run("DropProcTable", func(t *testing.T) {
		s, d, err := elfimage.Strip(mustRead(t, filepath.Join(dir, "demo.elf")), elfimage.StripOptions{DebugLink: "d.debug", DropProcTable: true})
		if err != nil {
			t.Fatal(err)
		}
		if se := openELF(t, s); se.Section(".elfimage.procs") != nil {
			t.Errorf("procedure table kept")
		}
		sub := t.TempDir()
		os.WriteFile(filepath.Join(sub, "s.elf"), s, 0o644)
		img := openImage(t, filepath.Join(sub, "s.elf"), noDirs)
		if _, err := img.Procedure(fib.Start); !errors.Is(err, elfimage.ErrNoDebugFile) {
			t.Errorf("Procedure without table or debug file: %v", err)
		}
		os.WriteFile(filepath.Join(sub, "d.debug"), d, 0o644)
		img2 := openImage(t, filepath.Join(sub, "s.elf"), noDirs)
		if got := answers(t, img2, procs); !slices.Equal(got, want) {
			t.Errorf("answers differ from the whole image's")
		}
	})
	t.Run("refused", func(t *testing.T) {
		for what, in := range map[string][]byte{"stripped": stripped, "debug file": dbg, "not ELF": []byte("hello")} {
			if _, _, err := elfimage.Strip(in, elfimage.StripOptions{}); err == nil {
				t.Errorf("Strip of the %s: no error", what)
			} else {
				t.Logf("%s: %v", what, err)
			}
		}
		if _, err := elfimage.Link(&elfimage.Module{}, elfimage.LinkOptions{DebugFile: "x"}); err == nil {
			t.Errorf("Link with DebugFile: no error")
		}
	})
}

func second[T any](_ T, err error) error { return err }

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStripTools checks the split files with the system tools: readelf,
// eu-readelf and eu-elflint find nothing in them they do not find in the whole
// image (eu-elflint --debuginfo for the debug file), llvm-dwarfdump
// verifies the debug file, objcopy --add-gnu-debuglink writes the same
// .gnu_debuglink bytes (name, padding, CRC-32), and addr2line,
// llvm-symbolizer, gdb and lldb read the stripped image's lines from the
// debug file beside it, as from the whole image.
func TestStripTools(t *testing.T) {
	dir := splitDemo(t, elfimage.LinkOptions{})
	full, stripped, dbg := filepath.Join(dir, "demo.elf"), filepath.Join(dir, "demo.stripped.elf"), filepath.Join(dir, "demo.debug")
	run := func(tool string, args ...string) string {
		out, _ := exec.Command(tooltest.Require(t, tool), args...).CombinedOutput()
		return string(out)
	}
	t.Run("readelf", func(t *testing.T) {
		for _, f := range []string{stripped, dbg} {
			out := run("readelf", "-W", "-a", f)
			if strings.Contains(strings.ToLower(out), "warning") || strings.Contains(strings.ToLower(out), "error") {
				t.Errorf("readelf -W -a %s:\n%s", filepath.Base(f), out)
			}
		}
	})
	t.Run("eu-readelf", func(t *testing.T) {
		complaints := func(f string, args ...string) []string {
			var out []string
			for _, l := range strings.Split(run("eu-readelf", append(args, f)...), "\n") {
				if ll := strings.ToLower(l); strings.Contains(ll, "invalid") || strings.Contains(ll, "error") || strings.Contains(ll, "warn") || strings.Contains(ll, "cannot") {
					out = append(out, strings.TrimSpace(l))
				}
			}
			return out
		}
		base := complaints(full, "-a", "--debug-dump")
		for _, c := range []struct {
			file string
			args []string
		}{{stripped, []string{"-a"}}, {dbg, []string{"-a", "--debug-dump"}}} {
			for _, l := range complaints(c.file, c.args...) {
				if !slices.Contains(base, l) {
					t.Errorf("eu-readelf %q %s: %q, which it does not say of the whole image", c.args, filepath.Base(c.file), l)
				}
			}
		}
		if out := run("eu-readelf", "--debug-dump=line", dbg); !strings.Contains(out, scheme.DemoFile) {
			t.Errorf("eu-readelf --debug-dump=line of the debug file names no %s:\n%s", scheme.DemoFile, out)
		}
	})
	t.Run("eu-elflint", func(t *testing.T) {
		base := strings.Split(run("eu-elflint", "-q", full), "\n")
		for _, c := range []struct{ file, flag string }{{stripped, "-q"}, {dbg, "--debuginfo"}} {
			for _, l := range strings.Split(run("eu-elflint", "-q", c.flag, c.file), "\n") {
				if !slices.Contains(base, l) {
					t.Errorf("eu-elflint %s %s: %q, which it does not say of the whole image", c.flag, filepath.Base(c.file), l)
				}
			}
		}
	})
	t.Run("llvm-dwarfdump", func(t *testing.T) {
		if out := run("llvm-dwarfdump", "--verify", dbg); !strings.Contains(out, "No errors.") {
			t.Errorf("llvm-dwarfdump --verify of the debug file:\n%s", out)
		}
	})
	t.Run("objcopy", func(t *testing.T) {
		linked := filepath.Join(t.TempDir(), "linked.elf")
		cmd := exec.Command(tooltest.Binutils(t, demoArch.Machine, "objcopy"), "--add-gnu-debuglink=demo.debug", full, linked)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("objcopy: %v\n%s", err, out)
		}
		a, _ := openELF(t, mustRead(t, linked)).Section(debugfile.SectionDebugLink).Data()
		b, _ := openELF(t, mustRead(t, stripped)).Section(debugfile.SectionDebugLink).Data()
		if !bytes.Equal(a, b) {
			t.Errorf(".gnu_debuglink: objcopy wrote % x, we wrote % x", a, b)
		}
	})
	t.Run("addr2line-llvm-symbolizer", func(t *testing.T) {
		// Both follow the stripped image's .gnu_debuglink to the debug
		// file beside it.
		img := openImage(t, full, noDirs)
		procs, err := img.Procedures()
		if err != nil {
			t.Fatal(err)
		}
		var addrs []string
		for _, p := range procs {
			addrs = append(addrs, fmt.Sprintf("%#x", p.Start+1))
		}
		for _, tool := range []struct {
			name string
			args []string
		}{{"addr2line", []string{"-f", "-i", "-e"}}, {"llvm-symbolizer", []string{"--inlining", "--obj"}}} {
			// For an address without a line row, llvm-symbolizer names the
			// unit's file when it reads the image itself and ?? when it
			// reads the debug file (objcopy --only-keep-debug and
			// --strip-debug --add-gnu-debuglink give the same).
			noLine := regexp.MustCompile(`(?m)^\S*:0(:0)?$`)
			got := noLine.ReplaceAllString(run(tool.name, append(append(append([]string{}, tool.args...), stripped), addrs...)...), "??:0")
			want := noLine.ReplaceAllString(run(tool.name, append(append(append([]string{}, tool.args...), full), addrs...)...), "??:0")
			if got != want || !strings.Contains(want, scheme.DemoFile+":") {
				t.Errorf("%s on the stripped image:\n%s\non the whole image:\n%s", tool.name, got, want)
			}
		}
	})
	t.Run("lldb", func(t *testing.T) {
		lldb := tooltest.Require(t, lldbtest.Names...)
		lookup := func(f string) string {
			out, err := tooltest.RunTool(t, exec.Command(lldb, "-b", "-o", "image lookup -n fib -v", f), 3*time.Minute)
			if err != nil {
				t.Fatalf("lldb: %v\n%s", err, out)
			}
			m := regexp.MustCompile(`LineEntry: .*`).FindString(out)
			if m == "" {
				t.Fatalf("lldb found no line entry for fib in %s:\n%s", f, out)
			}
			return m
		}
		if got, want := lookup(stripped), lookup(full); got != want {
			t.Errorf("lldb: %s in the stripped image, %s in the whole image", got, want)
		}
	})
	t.Run("gdb", func(t *testing.T) {
		gdb := tooltest.Require(t, "gdb")
		info := func(f string) string {
			out, err := tooltest.RunTool(t, exec.Command(gdb, "-q", "-nx", "-batch", "-ex", "info line fib", "-ex", "info scope fib", "-ex", "info line demo.scm:33", f), 3*time.Minute)
			if err != nil {
				t.Fatalf("gdb: %v\n%s", err, out)
			}
			return out
		}
		got, want := info(stripped), info(full)
		if got != want || !strings.Contains(want, `Line `) || !strings.Contains(want, "Symbol n is") {
			t.Errorf("gdb on the stripped image:\n%s\non the whole image:\n%s", got, want)
		}
	})
}

// foreignStrips are other people's strip tools as a user runs them on an
// image: the command (IN and OUT replaced by the paths) and the debug file
// it writes (OUT.debug), if any. GNU binutils' tools are those of the
// image's machine (tooltest.Binutils); eu-strip reads every machine.
var foreignStrips = []struct {
	name     string
	tool     string
	binutils bool // a GNU binutils tool: the build for the image's machine
	args     []string
	debug    bool // writes OUT.debug (and a .gnu_debuglink naming it)
}{
	{"objcopy--strip-debug", "objcopy", true, []string{"--strip-debug", "IN", "OUT"}, false},
	{"strip", "strip", true, []string{"-o", "OUT", "IN"}, false},
	{"eu-strip-f", "eu-strip", false, []string{"-f", "OUT.debug", "-o", "OUT", "IN"}, true},
}

// TestForeignStrip runs objcopy --strip-debug, strip and eu-strip -f on
// a linked image and checks that what they write still loads (with a
// note for each program header of ours that lost its section), runs,
// answers the queries its remaining sections allow (the procedure table
// and symbols when kept; everything through eu-strip's debug file), says
// why for the others, publishes to gdb (Symfile: Rebase of a file whose
// sections were renumbered and partly removed), and, given objcopy
// --only-keep-debug's debug file in a build-ID directory, answers every
// query as the whole image does.
func TestForeignStrip(t *testing.T) {
	fullPath := writeDemo(t, elfimage.LinkOptions{})
	full := openImage(t, fullPath, noDirs)
	procs, err := full.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	fib, _ := full.ProcedureByName("fib")
	fibPos, err := full.PositionAt(fib.Start)
	if err != nil {
		t.Fatal(err)
	}
	want := answers(t, full, procs)
	debugDir := t.TempDir()
	byID := debugfile.BuildIDPath(debugDir, full.BuildID())
	os.MkdirAll(filepath.Dir(byID), 0o755)
	if out, err := exec.Command(tooltest.Binutils(t, demoArch.Machine, "objcopy"), "--only-keep-debug", fullPath, byID).CombinedOutput(); err != nil {
		t.Fatalf("objcopy --only-keep-debug: %v\n%s", err, out)
	}
	for _, c := range foreignStrips {
		t.Run(c.name, func(t *testing.T) {
			var tool string
			if c.binutils {
				tool = tooltest.Binutils(t, demoArch.Machine, c.tool)
			} else {
				tool = tooltest.Require(t, c.tool)
			}
			out := filepath.Join(t.TempDir(), "demo.elf")
			var args []string
			for _, a := range c.args {
				a = strings.ReplaceAll(a, "IN", fullPath)
				args = append(args, strings.ReplaceAll(a, "OUT", out))
			}
			if b, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s %q: %v\n%s", c.tool, args, err, b)
			}
			img := openImage(t, out, noDirs)
			notes := img.LoadNotes()
			if len(notes) != 3 {
				t.Errorf("notes: %q, want one for each of PTLineProgram, PTLineStrings, PTProcTable", notes)
			}
			for _, n := range notes {
				if !strings.Contains(n, "ignored") || !strings.Contains(n, out) {
					t.Errorf("note %q", n)
				}
			}
			if got := runDemo(t, img); got != scheme.DemoOutput {
				t.Errorf("printed %q", got)
			}
			ef := openELF(t, mustRead(t, out))
			hasSyms := ef.Section(".symtab") != nil
			if c.debug {
				// Everything comes from eu-strip's debug file, found
				// through its .gnu_debuglink beside the image.
				if got := answers(t, img, procs); !slices.Equal(got, want) {
					t.Errorf("answers with eu-strip's debug file differ from the whole image's")
				}
			} else {
				if p, err := img.Procedure(fib.Start); err != nil || p.Name != "fib" || len(p.Args) != 1 {
					t.Errorf("Procedure: %+v, %v", p, err)
				}
				if p, err := img.ProcedureAt(fib.Start + 1); hasSyms != (err == nil) || (err == nil && p.Name != "fib") {
					t.Errorf("ProcedureAt with .symtab %v: %+v, %v", hasSyms, p, err)
				} else if err != nil && !errors.Is(err, elfimage.ErrNoDebugFile) {
					t.Errorf("ProcedureAt: %v, want ErrNoDebugFile", err)
				}
				if _, err := img.Locals(fib.Start); !errors.Is(err, elfimage.ErrNoDebugFile) || !strings.Contains(err.Error(), "tried ") {
					t.Errorf("Locals: %v, want ErrNoDebugFile naming the paths tried", err)
				}
				// The procedure table (kept: not a debug section) has
				// the position index.
				if got, err := img.PositionAt(fib.Start); err != nil || got != fibPos {
					t.Errorf("PositionAt: %v, %v, want %v", got, err, fibPos)
				}
				withDebug := openImage(t, out, &elfimage.LoadOptions{DebugFiles: &debugfile.Finder{DebugDirs: []string{debugDir}}})
				if got := answers(t, withDebug, procs); !slices.Equal(got, want) {
					t.Errorf("answers with objcopy --only-keep-debug's file differ from the whole image's")
				}
			}
			sym, err := img.Symfile()
			if err != nil {
				t.Fatalf("Symfile: %v", err)
			}
			moved := openELF(t, sym)
			for _, s := range ef.Sections {
				ms := moved.Section(s.Name)
				wantAddr := s.Addr
				if s.Flags&elf.SHF_ALLOC != 0 {
					wantAddr += uint64(img.Base())
				}
				if ms == nil || ms.Addr != wantAddr {
					t.Errorf("Symfile section %s: %+v, want sh_addr %#x", s.Name, ms, wantAddr)
				}
			}
			if hasSyms {
				syms, _ := moved.Symbols()
				for _, s := range syms {
					if s.Name == "fib" && s.Value != uint64(img.Base())+fib.Start {
						t.Errorf("Symfile: fib at %#x, want %#x", s.Value, uint64(img.Base())+fib.Start)
					}
				}
			}
		})
	}
}

// TestRebaseVersion1 checks that a version 1 rebase table (keyed by
// section index, as images linked before version 2 have) still moves an
// image as version 2 does, and that after a strip tool renumbered the
// sections it is refused with an error saying so, not applied to the
// wrong sections.
func TestRebaseVersion1(t *testing.T) {
	orig := mustRead(t, writeDemo(t, elfimage.LinkOptions{}))
	f := openELF(t, orig)
	rs := f.Section(elfimage.SectionRebase)
	tab, _ := rs.Data()
	// Version 2 groups: name NUL count deltas; version 1: index count
	// deltas. Rewrite in place and shrink sh_size.
	v1 := []byte{1, tab[1]}
	p := tab[2:]
	for len(p) > 0 {
		n := bytes.IndexByte(p, 0)
		name := string(p[:n])
		p = p[n+1:]
		idx := -1
		for i, s := range f.Sections {
			if s.Name == name {
				idx = i
			}
		}
		if idx < 1 || idx > 127 {
			t.Fatalf("section %q index %d", name, idx)
		}
		v1 = append(v1, byte(idx))
		count, k := uleb(p)
		v1 = append(v1, p[:k]...)
		p = p[k:]
		for range count {
			_, k := uleb(p)
			v1 = append(v1, p[:k]...)
			p = p[k:]
		}
	}
	old := bytes.Clone(orig)
	copy(old[rs.Offset:], v1)
	hdr := elfSectionHeaderOffset(t, orig, elfimage.SectionRebase)
	le := f.ByteOrder
	le.PutUint64(old[hdr+32:], uint64(len(v1)))
	a, err := elfimage.Rebase(orig, rebaseBase)
	if err != nil {
		t.Fatal(err)
	}
	b, err := elfimage.Rebase(old, rebaseBase)
	if err != nil {
		t.Fatalf("Rebase of a version 1 table: %v", err)
	}
	// Equal but for the table itself and its sh_size.
	for i := range a {
		inTable := uint64(i) >= rs.Offset && uint64(i) < rs.Offset+rs.Size
		inSize := uint64(i) >= hdr+32 && uint64(i) < hdr+40
		if !inTable && !inSize && a[i] != b[i] {
			t.Fatalf("byte %#x: version 1 gives %#x, version 2 %#x", i, b[i], a[i])
		}
	}
	// objcopy --strip-debug renumbers the sections: version 2 goes on,
	// version 1 is refused.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "v1.elf"), old, 0o644)
	if out, err := exec.Command(tooltest.Binutils(t, demoArch.Machine, "objcopy"), "--strip-debug", filepath.Join(dir, "v1.elf"), filepath.Join(dir, "v1s.elf")).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	_, err = elfimage.Rebase(mustRead(t, filepath.Join(dir, "v1s.elf")), rebaseBase)
	var fe *elfimage.FormatError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "renumbered") {
		t.Errorf("Rebase of a stripped image with a version 1 table: %v, want a *FormatError saying the sections were renumbered", err)
	}
}

func uleb(p []byte) (uint64, int) {
	var v uint64
	for i, c := range p {
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return v, len(p)
}

// elfSectionHeaderOffset returns the file offset of the section header
// of the section named name in the ELF64 file b.
func elfSectionHeaderOffset(t *testing.T, b []byte, name string) uint64 {
	t.Helper()
	f := openELF(t, b)
	shoff := f.ByteOrder.Uint64(b[40:])
	for i, s := range f.Sections {
		if s.Name == name {
			return shoff + uint64(i)*64
		}
	}
	t.Fatalf("no section %s", name)
	return 0
}

// BenchmarkStrip splits the demo program's image (Strip: both files and
// the debug file's CRC-32).
func BenchmarkStrip(b *testing.B) {
	dir := b.TempDir()
	m, err := scheme.Compile(filepath.Join(dir, scheme.DemoFile), scheme.DemoSource)
	if err != nil {
		b.Fatal(err)
	}
	img, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := elfimage.Strip(img, elfimage.StripOptions{DebugLink: "demo.debug"}); err != nil {
			b.Fatal(err)
		}
	}
}
