package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/a64sim"
	"golang.org/x/arch/x86/x86asm"
)

// linked is a compiled program's image as a reader of the file sees it.
type linked struct {
	arch  *arch.Arch // from the ELF header
	image []byte
	addr  uint64 // the procedure's link-time address
	code  []byte
	rows  []frame.Row // the procedure's CFA table, from .eh_frame
}

// link compiles and links src (for opts.Arch) and reads the image back
// (readImage).
func link(t testing.TB, file string, src []byte, opts Options) *linked {
	t.Helper()
	mod, err := Compile(file, "/bf", src, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := elfimage.Link(mod, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := readImage(b, ProcName(file))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// readImage reads procedure name's code and its FDE's rows from the image
// b with debug/elf and package frame.
func readImage(b []byte, name string) (*linked, error) {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	l := &linked{image: b, arch: arch.ForMachine(f.Machine)}
	if l.arch == nil {
		return nil, fmt.Errorf("machine %v", f.Machine)
	}
	for _, s := range syms {
		if s.Name == name && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			l.addr, l.code = s.Value, b[s.Value:s.Value+s.Size] // file offset = address
		}
	}
	if l.code == nil {
		return nil, fmt.Errorf("no symbol %s", name)
	}
	eh := f.Section(".eh_frame")
	if eh == nil {
		return nil, fmt.Errorf("no .eh_frame")
	}
	data, err := eh.Data()
	if err != nil {
		return nil, err
	}
	fdes, err := frame.NewEHFrame(data, eh.Addr, binary.LittleEndian, 8).FDEs()
	if err != nil {
		return nil, err
	}
	for i := range fdes {
		if fdes[i].Start == l.addr {
			if fdes[i].Size != uint64(len(l.code)) {
				return nil, fmt.Errorf("FDE covers %d bytes, the procedure has %d", fdes[i].Size, len(l.code))
			}
			if l.rows, err = frame.Table(&fdes[i]); err != nil {
				return nil, err
			}
		}
	}
	if l.rows == nil {
		return nil, fmt.Errorf("no FDE for the procedure")
	}
	return l, nil
}

// row returns the CFA table row in effect at address pc.
func (l *linked) row(pc uint64) *frame.Row {
	for i := range l.rows {
		if pc >= l.rows[i].Loc && pc < l.rows[i].End {
			return &l.rows[i]
		}
	}
	return nil
}

// A value is what the simulation knows of a register or stack slot.
type value struct {
	kind byte     // 0 unknown, 'c' the caller's value of reg, 's' CFA+off, 'r' the return address
	reg  arch.Reg // 'c'
	off  int32    // 's'
}

func caller(r arch.Reg) value { return value{kind: 'c', reg: r} }

// simState is the machine state before an instruction, relative to the
// procedure's CFA (rsp before the call that entered it, plus 8).
type simState struct {
	rsp      int64 // rsp = CFA + rsp
	rbp      value
	rbx, r12 value
	slots    [maxSlots]value // the 8-byte stack slots at CFA-8, CFA-16, ...
}

// maxSlots bounds the frame the simulation tracks, in 8-byte slots.
const maxSlots = 8

// slot returns the slot at CFA+off, or nil outside the tracked frame.
func (s *simState) slot(off int64) *value {
	i := -off/8 - 1
	if off >= 0 || off%8 != 0 || i >= maxSlots {
		return nil
	}
	return &s.slots[i]
}

func (s simState) String() string {
	return fmt.Sprintf("rsp=CFA%+d rbp=%v rbx=%v r12=%v slots=%v", s.rsp, s.rbp, s.rbx, s.r12, s.slots)
}

func (s *simState) reg(r x86asm.Reg) *value {
	switch r {
	case x86asm.RBP:
		return &s.rbp
	case x86asm.RBX:
		return &s.rbx
	case x86asm.R12:
		return &s.r12
	}
	return nil
}

// dwarfReg maps the registers the simulation tracks to DWARF numbers.
var dwarfReg = map[x86asm.Reg]arch.Reg{x86asm.RBP: arch.X86_64_RBP, x86asm.RBX: arch.X86_64_RBX, x86asm.R12: arch.X86_64_R12}

// simulate walks every path through the procedure from its entry,
// simulating what each instruction does to rsp, rbp, rbx, r12 and the
// stack slots, and checks at every instruction the CFA table row of the
// image's .eh_frame: the CFA rule must give the CFA, and the rules of rbp,
// rbx, r12 and the return address must find the caller's values. It also
// checks that every instruction is reached, every branch lands on an
// instruction inside the procedure, and paths that meet agree on the frame.
func simulate(l *linked) error {
	// The instructions, decoded in a line.
	// index[pc] numbers the instruction at code offset pc from 1 (0: pc
	// is not the start of an instruction).
	index := make([]int32, len(l.code))
	n := int32(0)
	for pc := 0; pc < len(l.code); {
		in, err := x86asm.Decode(l.code[pc:], 64)
		if err != nil {
			return fmt.Errorf("%#x: %v", pc, err)
		}
		n++
		index[pc] = n
		pc += in.Len
	}
	entry := simState{rsp: -8, rbp: caller(arch.X86_64_RBP), rbx: caller(arch.X86_64_RBX), r12: caller(arch.X86_64_R12)}
	entry.slots[0] = value{kind: 'r'}
	seen := make([]bool, n+1)
	states := make([]simState, n+1) // the state before each instruction seen
	type item struct {
		pc int
		st simState
	}
	work := []item{{0, entry}}
	for len(work) > 0 {
		pc, st := work[len(work)-1].pc, work[len(work)-1].st
		work = work[:len(work)-1]
		i := index[pc]
		if i == 0 {
			return fmt.Errorf("a branch lands at %#x, inside an instruction", pc)
		}
		in, _ := x86asm.Decode(l.code[pc:], 64)
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%#x %v: %s (state %v)", pc, x86asm.IntelSyntax(in, uint64(pc), nil), fmt.Sprintf(format, args...), st)
		}
		if seen[i] {
			if states[i] != st {
				return fail("paths disagree: %v and %v", states[i], st)
			}
			continue
		}
		seen[i], states[i] = true, st
		if err := checkRow(l, pc, &st); err != nil {
			return fail("%v", err)
		}

		var buf [2]int
		next := append(buf[:0], pc+in.Len)
		dst, _ := in.Args[0].(x86asm.Reg)
		switch in.Op {
		case x86asm.PUSH:
			st.rsp -= 8
			s := st.slot(st.rsp)
			if s == nil {
				return fail("a frame deeper than the simulation tracks")
			}
			*s = value{}
			if v := st.reg(dst); v != nil {
				*s = *v
			}
		case x86asm.POP:
			s := st.slot(st.rsp)
			if s == nil {
				return fail("pop outside the frame")
			}
			if v := st.reg(dst); v != nil {
				*v = *s
			} else if dst == x86asm.RSP {
				return fail("pop rsp")
			}
			st.rsp += 8
		case x86asm.RET:
			if st.rsp != -8 || st.rbp != caller(arch.X86_64_RBP) || st.rbx != caller(arch.X86_64_RBX) || st.r12 != caller(arch.X86_64_R12) {
				return fail("returns without restoring the caller's frame")
			}
			next = nil
		case x86asm.JMP, x86asm.JE, x86asm.JNE, x86asm.JB, x86asm.JAE, x86asm.JS:
			rel, ok := in.Args[0].(x86asm.Rel)
			if !ok {
				return fail("indirect branch")
			}
			target := pc + in.Len + int(rel)
			if in.Op == x86asm.JMP {
				next = []int{target}
			} else {
				next = append(next, target)
			}
		case x86asm.CMP, x86asm.TEST, x86asm.SYSCALL:
			// No tracked register changes (syscall clobbers rax, rcx, r11).
		default:
			if in.Op == x86asm.MOV && dst == x86asm.RBP && in.Args[1] == x86asm.RSP {
				st.rbp = value{kind: 's', off: int32(st.rsp)}
			} else if dst == x86asm.RSP || dst == x86asm.RBP {
				return fail("writes rsp or rbp")
			} else if v := st.reg(dst); v != nil {
				*v = value{} // the VM's values
			}
		}
		for _, n := range next {
			if n < 0 || n >= len(l.code) {
				return fail("goes to %#x, outside the procedure", n)
			}
			work = append(work, item{n, st})
		}
	}
	for pc, i := range index {
		if i > 0 && !seen[i] {
			in, _ := x86asm.Decode(l.code[pc:], 64)
			return fmt.Errorf("%#x %v is never reached", pc, x86asm.IntelSyntax(in, uint64(pc), nil))
		}
	}
	return nil
}

// checkCFI checks the image's CFI with the simulator of its architecture:
// simulate for x86-64, internal/a64sim for AArch64.
func checkCFI(l *linked) error {
	if l.arch == arch.AArch64 {
		return a64sim.CheckTable("bf", l.code, l.addr, l.rows, a64sim.Options{})
	}
	return simulate(l)
}

// arches are the architectures the compiler targets; every test that
// does not run the code covers both, whatever the host.
var arches = []*arch.Arch{arch.X86_64, arch.AArch64}

// checkRow checks the CFA table row at code offset pc against st.
func checkRow(l *linked, pc int, st *simState) error {
	row := l.row(l.addr + uint64(pc))
	if row == nil {
		return fmt.Errorf("no CFA table row")
	}
	cfa := row.CFA
	switch {
	case cfa.Kind == frame.RuleCFA && cfa.Reg == arch.X86_64_RSP:
		if st.rsp+cfa.Offset != 0 {
			return fmt.Errorf("CFA = rsp%+d, but rsp = CFA%+d", cfa.Offset, st.rsp)
		}
	case cfa.Kind == frame.RuleCFA && cfa.Reg == arch.X86_64_RBP:
		if st.rbp.kind != 's' || int64(st.rbp.off)+cfa.Offset != 0 {
			return fmt.Errorf("CFA = rbp%+d, but rbp = %v", cfa.Offset, st.rbp)
		}
	default:
		return fmt.Errorf("CFA rule %v", cfa.Format(arch.X86_64.RegName))
	}
	for r, d := range dwarfReg {
		switch rule := row.Rule(d); rule.Kind {
		case frame.RuleUnspecified, frame.RuleSameValue:
			if *st.reg(r) != caller(d) {
				return fmt.Errorf("%v: same value, but it holds %v", r, *st.reg(r))
			}
		case frame.RuleOffset:
			if s := st.slot(rule.Offset); s == nil || *s != caller(d) || rule.Offset < st.rsp {
				return fmt.Errorf("%v saved at CFA%+d, where the caller's value is not (rsp = CFA%+d)", r, rule.Offset, st.rsp)
			}
		default:
			return fmt.Errorf("%v: rule %v", r, rule.Kind)
		}
	}
	if ra := row.Rule(arch.X86_64_RA); ra.Kind != frame.RuleOffset || st.slot(ra.Offset) == nil || *st.slot(ra.Offset) != (value{kind: 'r'}) {
		return fmt.Errorf("return address rule %v", ra.Format(arch.X86_64.RegName))
	}
	return nil
}

// everything exercises every kind of code the compiler emits, folded and
// not: runs, moves both ways, nested loops, a clear, input and output.
const everything = "++[>+++<-]>\n[-]>>,.<<\n[[>]<]+-<>"

// TestCFI checks the call frame information of every test program at
// every instruction against the simulation of its architecture, as read
// back from the image, and for AArch64 also the procedure's own CFI with
// the live ranges of vm (x0, then x19).
func TestCFI(t *testing.T) {
	files, err := filepath.Glob("testdata/*.b")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	srcs := map[string][]byte{"everything.b": []byte(everything), "empty.b": nil, "comment.b": []byte("no commands here\n")}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(f)] = b
	}
	for name, src := range srcs {
		for _, a := range arches {
			for _, fold := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/fold=%v", name, a.Name, fold), func(t *testing.T) {
					opts := Options{Fold: fold, Arch: a}
					if err := checkCFI(link(t, name, src, opts)); err != nil {
						t.Error(err)
					}
					if a != arch.AArch64 {
						return
					}
					for _, eof := range []int{0, 255, KeepCell} {
						opts.EOF = eof
						mod, err := Compile(name, "/", src, opts)
						if err != nil {
							t.Fatal(err)
						}
						if err := a64sim.Check(mod.Procs[0], a64sim.Options{Vars: true}); err != nil {
							t.Errorf("eof %d: %v", eof, err)
						}
					}
				})
			}
		}
	}
}

// aarch64LRSave and aarch64CFAOnFP are the two CFI instructions of the
// AArch64 code whose loss leaves the CFI true: the body calls nothing, so
// x30 keeps the return address (the rule for it matches the frame record
// that frame-pointer unwinders read), and sp does not move in the body, so
// sp+32 is as right as x29+32 (which unwinders that prefer the frame
// pointer expect, and which stays right should the body ever push).
var (
	aarch64LRSave  = frame.Insn{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_LR, Offset: -24}
	aarch64CFAOnFP = frame.Insn{PC: 8, Op: frame.OpDefCFARegister, Reg: arch.AArch64_FP}
)

func sameInsn(a, b frame.Insn) bool {
	return a.PC == b.PC && a.Op == b.Op && a.Reg == b.Reg && a.Offset == b.Offset
}

// TestCFIRejectsWrongRows makes sure the simulation is not vacuous: the
// same code with any one CFI instruction dropped, or its offset off by
// 8 bytes, fails it (or the linker refuses it).
func TestCFIRejectsWrongRows(t *testing.T) {
	for _, a := range arches {
		t.Run(a.Name, func(t *testing.T) { testCFIRejectsWrongRows(t, a) })
	}
}

func testCFIRejectsWrongRows(t *testing.T, a *arch.Arch) {
	mod, err := Compile("w.b", "/", []byte(everything), Options{Fold: true, Arch: a})
	if err != nil {
		t.Fatal(err)
	}
	p := mod.Procs[0]
	good := p.CFI
	n := 0 // mutants caught
	for i := range good {
		for _, change := range []string{"dropped", "off by 8"} {
			cfi := append([]frame.Insn(nil), good...)
			if change == "dropped" {
				cfi = append(cfi[:i], cfi[i+1:]...)
			} else if cfi[i].Offset != 0 {
				cfi[i].Offset -= 8
			} else {
				continue
			}
			p.CFI = cfi
			b, err := elfimage.Link(mod, elfimage.LinkOptions{})
			if err != nil {
				continue
			}
			l, err := readImage(b, p.Name)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkCFI(l); err == nil {
				if a == arch.AArch64 && change == "dropped" && (sameInsn(good[i], aarch64LRSave) || sameInsn(good[i], aarch64CFAOnFP)) {
					n++ // an equivalent mutant: see aarch64LRSave
					continue
				}
				t.Errorf("the CFI with instruction %d (%v at %d) %s passes the simulation", i, good[i].Op, good[i].PC, change)
			} else {
				n++
			}
		}
	}
	if n < len(good) {
		t.Errorf("the simulation caught %d mutants of %d CFI instructions", n, len(good))
	}
}

// TestVarsAArch64RejectsWrongRanges: the AArch64 variable check is not
// vacuous: vm's register range moved one instruction early or late, or
// extended past the epilogue's reload, fails it.
func TestVarsAArch64RejectsWrongRanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(live []elfimage.LiveRange)
	}{
		{"x19 one instruction early", func(l []elfimage.LiveRange) { l[0].End -= 4; l[1].Start -= 4 }},
		{"x0 through the body, which system calls overwrite", func(l []elfimage.LiveRange) { l[1].Location = []byte{0x50} }},
		{"x19 past the reload", func(l []elfimage.LiveRange) { l[1].End += 4 }},
		{"x0 in the stubs", func(l []elfimage.LiveRange) { l[2].Location = []byte{0x50} }},
	} {
		mod, err := Compile("v.b", "/", []byte(everything), Options{Fold: true, Arch: arch.AArch64})
		if err != nil {
			t.Fatal(err)
		}
		p := mod.Procs[0]
		tc.edit(p.Params[0].Live)
		if err := a64sim.Check(p, a64sim.Options{Vars: true}); err == nil || !errors.Is(err, a64sim.ErrCheck) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
