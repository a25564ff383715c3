//go:build linux && amd64

package gdbjit

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// lldbImageRE matches a JIT module of `image list`:
//
//	[  2] EE707209-B930-3B88-A609-F4A535DAF157-FB18E379 0x00007ffff7e24000 JIT(0x7ffff7e23040) (0x00007ffff7e23040)
//
// the UUID (the build ID, grouped), the load address and the symbol
// file's address.
var lldbImageRE = regexp.MustCompile(`\[\s*\d+\] ([0-9A-F-]+) 0x[0-9a-f]+ JIT\((0x[0-9a-f]+)\)`)

// TestLLDBPublisher runs pubprog frames (see TestGDBPublisherUnwind) under
// lldb-19: the breakpoint on pub_inner, set before the code exists, is
// pending and resolves when the Publisher publishes it; bt shows
// pub_inner, then pub_outer at the line of its call, then the Go
// trampoline, each JIT frame in the module of its own symbol file; LLDB
// unwinds pub_outer with the symbol file's .eh_frame ('eh_frame CFI' is
// its plan, with the rows the CFI gives); `image list` shows each symbol
// file's build ID as its UUID, equal to the one recomputed from a copy of
// the registered file.
func TestLLDBPublisher(t *testing.T) {
	lldb := tooltest.Require(t, lldbtest.Names...)
	prog := buildPubProg(t)
	dump := t.TempDir()
	cmds := []string{
		0: "breakpoint set -n pub_inner",
		1: "run",
		2: "bt",
		3: "image show-unwind -n pub_outer",
		4: "image list",
		5: "breakpoint delete",
		6: "continue",
	}
	s := &lldbtest.Session{LLDB: lldb, Program: prog, Args: []string{"frames"}, Dir: t.TempDir(),
		Env: []string{"PUBPROG_DUMP=" + dump}, Cmds: cmds}
	r, err := s.Run()
	if r != nil {
		defer func() {
			if t.Failed() {
				t.Logf("lldb output:\n%s", r.Output)
			}
		}()
	}
	if err != nil {
		t.Fatal(err)
	}
	b := r.Blocks
	inner, outer := pubAddrs(t, r.Output)
	mustContain(t, cmds[0], b[0], "Breakpoint 1: no locations (pending).")
	mustContain(t, cmds[1], b[1], "1 location added to breakpoint 1")
	mustContain(t, cmds[1], b[1], "stop reason = breakpoint 1.1")
	fs := lldbtest.Frames(b[2])
	if len(fs) < 3 {
		t.Fatalf("bt: %d frames:\n%s", len(fs), b[2])
	}
	// LLDB skips what it takes for the prologue: it stops at pub_inner's
	// second line row (its ret), at offset 5.
	if f := fs[0]; f.Func != "pub_inner" || f.PC != inner+5 || f.File != "pubprog.src" || f.Line != pubInnerLine+1 || !strings.HasPrefix(f.Module, "JIT(") {
		t.Errorf("frame 0 = %+v, want pub_inner at %#x, pubprog.src:%d, in a JIT module", f, inner+5, pubInnerLine+1)
	}
	if f := fs[1]; f.Func != "pub_outer" || f.PC != outer+9 || f.File != "pubprog.src" || f.Line != pubOuterLine+1 || !strings.HasPrefix(f.Module, "JIT(") || f.Module == fs[0].Module {
		t.Errorf("frame 1 = %+v, want pub_outer at %#x, pubprog.src:%d, in the JIT module of another symbol file", f, outer+9, pubOuterLine+1)
	}
	if f := fs[2]; f.Module != "pubprog" || !strings.HasPrefix(f.Func, "github.com/elfimage/elfimage/native.trampoline") {
		t.Errorf("frame 2 = %+v, want pubprog`native.trampoline (the caller of pub_outer)", f)
	}
	mustContain(t, cmds[3], b[3], "Asynchronous (not restricted to call-sites) UnwindPlan is 'eh_frame CFI'")
	mustContain(t, cmds[3], b[3], "Synchronous (restricted to call-sites) UnwindPlan is 'eh_frame CFI'")
	_, plan, _ := strings.Cut(b[3], "\neh_frame UnwindPlan:")
	for _, row := range []string{"row[0]:    0: CFA=rsp +8 => rip=[CFA-8]", "row[1]:    4: CFA=rsp+32 => rip=[CFA-8]", "row[2]:   13: CFA=rsp +8 => rip=[CFA-8]"} {
		if !strings.Contains(plan, row) {
			t.Errorf("eh_frame UnwindPlan of pub_outer lacks %q:\n%s", row, b[3])
		}
	}

	ids, fdes := dumpedSymfiles(t, dump)
	checkPubFrames(t, fdes, inner, outer)
	got := map[uint64]string{}
	for _, m := range lldbImageRE.FindAllStringSubmatch(b[4], -1) {
		addr, _ := strconv.ParseUint(m[2][2:], 16, 64)
		got[addr] = strings.ToLower(strings.ReplaceAll(m[1], "-", ""))
	}
	if !reflect.DeepEqual(got, ids) {
		t.Errorf("LLDB's JIT modules and UUIDs %v, want the registered files' build IDs %v:\n%s", got, ids, b[4])
	}
	mustContain(t, cmds[6], r.Output, "pubprog: pub_outer returned 42")
}
