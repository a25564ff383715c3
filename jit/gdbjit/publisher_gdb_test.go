//go:build linux && amd64

package gdbjit

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/readelf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

var (
	pubOnce sync.Once
	pubPath string
	pubErr  error
)

// buildPubProg builds testdata/pubprog once per test run (into the
// directory of buildProg's program, removed by TestMain) and returns its
// path.
func buildPubProg(t *testing.T) string {
	t.Helper()
	goCmd := tooltest.Require(t, "go")
	buildProg(t) // makes progDir
	pubOnce.Do(func() {
		pubPath, pubErr = buildTestdataProg(goCmd, "pubprog")
	})
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	return pubPath
}

// TestGDBPublisher runs testdata/pubprog under gdb: a breakpoint on
// pub_b, set before the code exists (pending), fires after the Publisher
// published it on its own timer; gdb knows pub_b once, with its line;
// after Remove and Flush, `info symbol` of the removed pub_c's address
// finds nothing while its neighbours are still known.
func TestGDBPublisher(t *testing.T) {
	gdb := tooltest.Require(t, "gdb")
	prog := buildPubProg(t)
	cmds := []string{
		0:  "break pub_b",
		1:  "break main.afterRemove",
		2:  "run pending",
		3:  "info symbol $pc",
		4:  "info line pub_d",
		5:  "continue",
		6:  "set language c", // for the casts below (the frame is Go's)
		7:  "info symbol (long)&pub_a + 32",
		8:  "info line pub_c",
		9:  "info symbol (long)&pub_a + 48",
		10: "info symbol (long)&pub_a + 16",
		11: "delete",
		12: "continue",
	}
	b, all := gdbRun(t, gdb, []string{prog}, cmds)
	if t.Failed() {
		return
	}
	m := regexp.MustCompile(`pubprog: code at (0x[0-9a-f]+)`).FindStringSubmatch(all)
	if m == nil {
		t.Fatalf("program did not print its code address:\n%s", all)
	}
	base, _ := strconv.ParseUint(m[1][2:], 16, 64)
	mustContain(t, "break pub_b", b[0], "Breakpoint 1 (pub_b) pending.")
	mustContain(t, "run", b[2], "hit Breakpoint 1, pub_b () at /jit/gdbjit/pubprog.src:2")
	mustContain(t, "info symbol $pc", b[3], "pub_b in section .text")
	if strings.Count(b[3], "in section") != 1 {
		t.Errorf("info symbol $pc: pub_b is known more than once:\n%s", b[3])
	}
	mustContain(t, "info line pub_d", b[4], fmt.Sprintf(`Line 4 of "/jit/gdbjit/pubprog.src" starts at address %#x <pub_d>`, base+48))
	mustContain(t, "continue", b[5], "pubprog: pub_b returned 1")
	mustContain(t, "continue", b[5], "main.afterRemove")
	mustContain(t, "info symbol pub_c (removed)", b[7], "No symbol matches (long)&pub_a + 32.")
	mustContain(t, "info line pub_c (removed)", b[8], `Function "pub_c" not defined.`)
	mustContain(t, "info symbol pub_d (kept)", b[9], "pub_d in section .text")
	mustContain(t, "info symbol pub_b (kept)", b[10], "pub_b in section .text")
	mustContain(t, "last continue", b[12], "pubprog: done")
	if t.Failed() {
		t.Logf("gdb output:\n%s", all)
	}
}

// Source lines of pubprog's frames scenario (testdata/pubprog).
const (
	pubInnerLine = 10
	pubOuterLine = 20
)

// dumpedSymfiles reads the symbol files pubprog frames copied to dir
// (symfile-ADDR.elf) and checks each: build ID recomputed, .eh_frame
// printed by readelf and parsed by llvm-dwarfdump, the file verified. It
// returns the build IDs by symbol file address, and the readelf FDEs of
// all files by pc_begin.
func dumpedSymfiles(t *testing.T, dir string) (map[uint64]string, map[uint64]readelf.InterpEntry) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "symfile-*.elf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("pubprog dumped no symbol file into %s (%v)", dir, err)
	}
	ids := map[uint64]string{}
	fdes := map[uint64]readelf.InterpEntry{}
	for _, p := range paths {
		var addr uint64
		if _, err := fmt.Sscanf(filepath.Base(p), "symfile-%x.elf", &addr); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ids[addr] = checkBuildID(t, b)
		f := readelfFrames(t, p)
		for pc, e := range f {
			fdes[pc] = e
		}
		dwarfdumpVerify(t, p, len(f))
	}
	return ids, fdes
}

// checkPubFrames checks the FDEs readelf printed for pubprog's frames
// scenario: pub_inner keeps the CIE's row, pub_outer's CFA moves to
// rsp+32 after its sub rsp, 24 and back after its add.
func checkPubFrames(t *testing.T, fdes map[uint64]readelf.InterpEntry, inner, outer uint64) {
	t.Helper()
	if e, ok := fdes[inner]; !ok || e.PCEnd != inner+6 {
		t.Errorf("FDE of pub_inner: %+v, want [%#x, %#x)", e, inner, inner+6)
	}
	e, ok := fdes[outer]
	if !ok || e.PCEnd != outer+14 {
		t.Fatalf("FDE of pub_outer: %+v, want [%#x, %#x)", e, outer, outer+14)
	}
	var got []string
	for _, r := range e.Rows {
		got = append(got, fmt.Sprintf("%#x %s %s", r.Loc-outer, r.Cols["CFA"], r.Cols["ra"]))
	}
	if want := []string{"0x0 rsp+8 c-8", "0x4 rsp+32 c-8", "0xd rsp+8 c-8"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pub_outer's rows (offset CFA ra) %q, want %q", got, want)
	}
}

var pubAddrsRE = regexp.MustCompile(`pubprog: pub_inner at (0x[0-9a-f]+), pub_outer at (0x[0-9a-f]+)`)

// pubAddrs returns the code addresses pubprog frames printed.
func pubAddrs(t *testing.T, out string) (inner, outer uint64) {
	t.Helper()
	m := pubAddrsRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("pubprog did not print its code addresses:\n%s", out)
	}
	inner, _ = strconv.ParseUint(m[1][2:], 16, 64)
	outer, _ = strconv.ParseUint(m[2][2:], 16, 64)
	return inner, outer
}

// TestGDBPublisherUnwind runs pubprog frames under gdb: two procedures
// published one at a time by a Publisher, pub_outer calling pub_inner
// from a frame (sub rsp, 24) that only its CFI describes. At a pending
// breakpoint on pub_inner, gdb's bt shows pub_inner, then pub_outer at
// the line of its call, then the Go trampoline that called pub_outer:
// gdb unwound both JIT frames with the symbol files' .eh_frame (its
// prologue analyser alone takes pub_outer's CFA for rsp+8 and reads a
// garbage return address). gdb reports for each in-memory symbol file
// the build ID of its note, which equals the SHA-1 recomputed from a copy
// of the registered file; readelf and llvm-dwarfdump accept those files.
func TestGDBPublisherUnwind(t *testing.T) {
	gdb := tooltest.Require(t, "gdb")
	prog := buildPubProg(t)
	dump := t.TempDir()
	cmds := []string{
		0: "set environment PUBPROG_DUMP " + dump,
		1: "break pub_inner",
		2: "run frames",
		3: "bt",
		4: `python for o in gdb.objfiles(): print("objfile", o.filename, o.build_id)`,
		5: "delete",
		6: "continue",
	}
	b, all := gdbRun(t, gdb, []string{prog}, cmds)
	if t.Failed() {
		return
	}
	defer func() {
		if t.Failed() {
			t.Logf("gdb output:\n%s", all)
		}
	}()
	inner, outer := pubAddrs(t, all)
	mustContain(t, "break pub_inner", b[1], "Breakpoint 1 (pub_inner) pending.")
	mustContain(t, "run", b[2], fmt.Sprintf("hit Breakpoint 1, pub_inner () at /jit/gdbjit/pubprog.src:%d", pubInnerLine))
	frames := gdbtest.Frames(b[3])
	if len(frames) < 3 {
		t.Fatalf("bt: %d frames:\n%s", len(frames), b[3])
	}
	if f := frames[0]; f.Func != "pub_inner" || f.File != "/jit/gdbjit/pubprog.src" || f.Line != pubInnerLine {
		t.Errorf("frame 0 = %+v, want pub_inner at pubprog.src:%d", f, pubInnerLine)
	}
	// The return address is after the call, in pub_outer's second line row.
	if f := frames[1]; f.Func != "pub_outer" || f.PC != outer+9 || f.File != "/jit/gdbjit/pubprog.src" || f.Line != pubOuterLine+1 {
		t.Errorf("frame 1 = %+v, want pub_outer at %#x, pubprog.src:%d", f, outer+9, pubOuterLine+1)
	}
	if f := frames[2]; f.Func != "github.com/elfimage/elfimage/native.trampoline" {
		t.Errorf("frame 2 = %+v, want native.trampoline (the caller of pub_outer)", f)
	}
	ids, fdes := dumpedSymfiles(t, dump)
	checkPubFrames(t, fdes, inner, outer)
	got := map[uint64]string{}
	for _, line := range strings.Split(b[4], "\n") {
		var addr uint64
		var id string
		if _, err := fmt.Sscanf(line, "objfile <in-memory@%v> %s", &addr, &id); err == nil {
			got[addr] = id
		}
	}
	if !reflect.DeepEqual(got, ids) {
		t.Errorf("gdb's in-memory objfiles and build IDs %v, want the registered files' %v", got, ids)
	}
	mustContain(t, "continue", b[6], "pubprog: pub_outer returned 42")
}
