package lldbtest

import (
	"reflect"
	"strings"
	"testing"
)

// sample is lldb-19's output for `lldb-19 -b -o 'breakpoint set -n fib' -o
// run -o bt -o 'frame variable' -- elfimage run -jit -gdb prog.scm`
// (shortened), with the program's output ("55") not ending its line.
const sample = `(lldb) target create "/t/elfimage"
Current executable set to '/t/elfimage' (x86_64).
(lldb) breakpoint set -n fib
Breakpoint 1: no locations (pending).
WARNING:  Unable to resolve breakpoint to any actual locations.
(lldb) run
1 location added to breakpoint 1
Process 10846 launched: '/t/elfimage' (x86_64)
Process 10846 stopped
* thread #1, name = 'elfimage', stop reason = breakpoint 1.1
    frame #0: 0x00007ffff7e22048 JIT(0x7ffff7e1d040)` + "`" + `fib(n=10) at prog.scm:1:17
(lldb) bt
* thread #1, name = 'elfimage', stop reason = breakpoint 1.1
  * frame #0: 0x00007ffff7e22048 JIT(0x7ffff7e1d040)` + "`" + `fib(n=10) at prog.scm:1:17
    frame #1: 0x00007ffff7e220f6 JIT(0x7ffff7e1d040)` + "`" + `main at prog.scm:2:25
    frame #2: 0x00007ffff7e22026 JIT(0x7ffff7e1d040)` + "`" + `%start + 22
    frame #4: 0x0000000000578225 elfimage` + "`" + `github.com/elfimage/elfimage/native.call at call_amd64.go:27
    frame #9: 0x0000000000601234 elfimage` + "`" + `main.(*T).m at t.go:3
    frame #11: 0x000000000060b7fe elfimage` + "`" + `main.main at main.go:55
(lldb) frame variable
(long) n = 10
(lldb) continue
55(lldb) process status
Process 10846 exited with status = 0 (0x00000000)
`

func TestSplitAndParse(t *testing.T) {
	cmds := []string{"breakpoint set -n fib", "run", "bt", "frame variable", "continue", "process status"}
	r, err := Split(sample, cmds)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Blocks[0], "Breakpoint 1: no locations (pending).") || !strings.HasSuffix(r.Blocks[1], "prog.scm:1:17") {
		t.Errorf("blocks 0 and 1: %q, %q", r.Blocks[0], r.Blocks[1])
	}
	if r.Blocks[4] != "55" || !strings.HasPrefix(r.Blocks[5], "Process 10846 exited") {
		t.Errorf("blocks 4 and 5: %q, %q", r.Blocks[4], r.Blocks[5])
	}
	got := Frames(r.Blocks[2])
	want := []Frame{
		{Num: 0, PC: 0x7ffff7e22048, Module: "JIT(0x7ffff7e1d040)", Func: "fib", Args: "n=10", File: "prog.scm", Line: 1, Column: 17},
		{Num: 1, PC: 0x7ffff7e220f6, Module: "JIT(0x7ffff7e1d040)", Func: "main", File: "prog.scm", Line: 2, Column: 25},
		{Num: 2, PC: 0x7ffff7e22026, Module: "JIT(0x7ffff7e1d040)", Func: "%start", Offset: 22},
		{Num: 4, PC: 0x578225, Module: "elfimage", Func: "github.com/elfimage/elfimage/native.call", File: "call_amd64.go", Line: 27},
		{Num: 9, PC: 0x601234, Module: "elfimage", Func: "main.(*T).m", File: "t.go", Line: 3},
		{Num: 11, PC: 0x60b7fe, Module: "elfimage", Func: "main.main", File: "main.go", Line: 55},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Frames:\n got %+v\nwant %+v", got, want)
	}
	if f := Funcs(r.Blocks[2]); strings.Join(f, " ") != "fib main %start github.com/elfimage/elfimage/native.call main.(*T).m main.main" {
		t.Errorf("Funcs = %q", f)
	}
	if v := Vars(r.Blocks[3]); !reflect.DeepEqual(v, map[string]Var{"n": {Type: "long", Value: "10"}}) {
		t.Errorf("Vars = %v", v)
	}
	if st, lost, ok := Exit(r.Blocks[5]); st != 0 || lost || !ok {
		t.Errorf("Exit = %d, %v, %v, want 0, false, true", st, lost, ok)
	}
	if st, lost, ok := Exit("Process 25763 exited with status = -1 (0xffffffff) lost connection"); st != -1 || !lost || !ok {
		t.Errorf("Exit (lost connection) = %d, %v, %v, want -1, true, true", st, lost, ok)
	}
	if _, _, ok := Exit(r.Blocks[3]); ok {
		t.Error("Exit found a report in frame variable's output")
	}
	if _, err := Split(sample, append(cmds, "bt")); err == nil {
		t.Error("Split found an echo that is not there")
	}
}
