package symbolize_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/symbolize"
)

// TestLibcDebugPackage: the system's libc.so.6 (stripped, with .dynsym
// and a build ID) read with the separate debug file that libc6-dbg
// installs under /usr/lib/debug/.build-id symbolizes as llvm-symbolizer
// does (which follows the build ID too): inlined frames from the debug
// file's DWARF, the outermost name from libc's .dynsym. 0x98a10 is in
// malloc, with four frames (heap_for_ptr, arena_for_chunk twice,
// __libc_malloc).
func TestLibcDebugPackage(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skipf("no %s", libc)
	}
	tg, err := debugfile.ReadTarget(libc)
	if err != nil {
		t.Fatal(err)
	}
	dbg, err := (&debugfile.Finder{}).Find(context.Background(), tg)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("libc6-dbg not installed: %v", err)
		}
		t.Skipf("libc6-dbg not installed: %v", err)
	}
	open := func() (*symbolize.Symbolizer, error) { return symbolize.OpenDebug(libc, dbg) }
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	frames, err := s.Symbolize(0x98a10, nil)
	s.Close()
	if err != nil || len(frames) != 4 || frames[0].Function != "heap_for_ptr" || frames[3].Function != "__libc_malloc" {
		t.Errorf("0x98a10: %v%s", err, fmtFrames(frames))
	}
	addrs := append(codeAddrs(t, dbg, 2000, 7), 0x98a10)
	want := llvmSymbolize(t, libc, addrs)
	// Where the DWARF and .dynsym say nothing (assembly without DWARF,
	// local symbols), llvm-symbolizer answers ?? and we answer the debug
	// file's .symtab name, as llvm-symbolizer reads it from the debug
	// file itself.
	fromDebug := llvmSymbolize(t, dbg, addrs)
	s, err = open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bad, inl, named := 0, 0, 0
	for i, a := range addrs {
		w := want[i]
		if len(w) == 1 && w[0] == (symbolize.Frame{}) {
			w = fromDebug[i]
			named++
		}
		got, err := s.Symbolize(a, nil)
		if err != nil {
			got = []symbolize.Frame{{}}
		}
		if len(got) > 1 {
			inl++
		}
		if !slices.Equal(got, w) {
			if bad++; bad <= 10 {
				t.Errorf("%#x: ours (err %v):%s\n\tllvm-symbolizer:%s", a, err, fmtFrames(got), fmtFrames(w))
			}
		}
	}
	if bad > 0 || inl == 0 {
		t.Errorf("%d of %d addresses differ; %d with inlined frames", bad, len(addrs), inl)
	}
	t.Logf("%d addresses, %d with inlined frames, %d named from the debug file's .symtab only", len(addrs), inl, named)
}

// TestObjcopySplit: a gcc -O2 build split by objcopy (--only-keep-debug,
// then --strip-debug --add-gnu-debuglink) answers through OpenDebug
// exactly as the unstripped file does, and as llvm-symbolizer answers for
// the stripped file (it follows the debuglink beside the file).
func TestObjcopySplit(t *testing.T) {
	exe := buildC(t, "gcc", "-O2", "-g")
	objcopy := tooltest.Require(t, "objcopy")
	dir := t.TempDir()
	debug, stripped := filepath.Join(dir, "prog.debug"), filepath.Join(dir, "prog")
	for _, args := range [][]string{{"--only-keep-debug", exe, debug}, {"--strip-debug", "--add-gnu-debuglink=" + debug, exe, stripped}} {
		if out, err := exec.Command(objcopy, args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %v: %v\n%s", args, err, out)
		}
	}
	tg, err := debugfile.ReadTarget(stripped)
	if err != nil {
		t.Fatal(err)
	}
	found, err := (&debugfile.Finder{DebugDirs: []string{}}).Find(context.Background(), tg)
	if err != nil || found != debug {
		t.Fatalf("Find = %q, %v; want %s", found, err, debug)
	}
	addrs := codeAddrs(t, exe, 3000, 3)
	want := symbolizeAll(t, exe, addrs)
	s, err := symbolize.OpenDebug(stripped, debug)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.DebugPath() != debug {
		t.Errorf("DebugPath = %q", s.DebugPath())
	}
	alone, err := symbolize.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	if ok, _ := alone.HasDWARF(); ok {
		t.Fatal("the stripped file still has DWARF")
	}
	for i, a := range addrs {
		got, err := s.Symbolize(a, nil)
		if err != nil || !slices.Equal(got, want[i]) {
			t.Fatalf("%#x: %v%s\n\tunstripped:%s", a, err, fmtFrames(got), fmtFrames(want[i]))
		}
	}
	// Section: the stripped file's own .eh_frame, the debug file's
	// .debug_info.
	if eh, _, err := s.Section(".eh_frame"); err != nil || len(eh) == 0 {
		t.Errorf(".eh_frame: %d bytes, %v", len(eh), err)
	}
	if di, _, err := s.Section(".debug_info"); err != nil || len(di) == 0 {
		t.Errorf(".debug_info: %d bytes, %v", len(di), err)
	}
	compareOpenWithLLVM(t, stripped, addrs[:1000], true, func() (*symbolize.Symbolizer, error) { return symbolize.OpenDebug(stripped, debug) })
}
