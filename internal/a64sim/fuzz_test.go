package a64sim_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/a64sim"
)

// FuzzCheck runs Check on arbitrary code and CFI (built from the input:
// 4-byte words, then 4-byte CFI instructions: words since the previous
// one, op, register, offset in 8-byte units; the seeds are the test
// procedures, which pass),
// and, when the linker accepts the procedure, CheckTable on the rows read
// back from the linked image's .eh_frame: the two paths to the rows must
// give the same verdict and message, every error must wrap ErrCheck or
// ErrUnsupported, and nothing may panic or run away.
func FuzzCheck(f *testing.F) {
	for _, p := range []*elfimage.Proc{framed(), leaf(), abort()} {
		var cfi []byte
		prev := uint64(0)
		for _, in := range p.CFI {
			op := map[frame.Op]byte{frame.OpDefCFA: 0, frame.OpDefCFARegister: 1, frame.OpDefCFAOffset: 2, frame.OpOffset: 3,
				frame.OpRestore: 4, frame.OpUndefined: 5, frame.OpSameValue: 6, frame.OpRememberState: 7, frame.OpRestoreState: 8}[in.Op]
			cfi = append(cfi, byte((in.PC-prev)/4), op, byte(in.Reg), byte(in.Offset/8))
			prev = in.PC
		}
		f.Add(p.Code, cfi)
	}
	f.Fuzz(func(t *testing.T, code, cfiBytes []byte) {
		code = code[:len(code)&^3]
		if len(code) == 0 || len(code) > 1024 || len(cfiBytes) > 256 {
			return
		}
		p := &elfimage.Proc{Name: "f", Code: code, Lines: []elfimage.LineRow{{Offset: 0, Line: 1, Column: 1, IsStmt: true}}}
		ops := []frame.Op{frame.OpDefCFA, frame.OpDefCFARegister, frame.OpDefCFAOffset, frame.OpOffset,
			frame.OpRestore, frame.OpUndefined, frame.OpSameValue, frame.OpRememberState, frame.OpRestoreState, frame.OpRegister}
		pc := uint64(0)
		for i := 0; i+4 <= len(cfiBytes); i += 4 {
			b := cfiBytes[i : i+4]
			pc += uint64(b[0]) * 4 // words from the previous instruction
			if pc >= uint64(len(code)) {
				break
			}
			in := frame.Insn{PC: pc, Op: ops[int(b[1])%len(ops)], Reg: arch.Reg(b[2] % 33), Offset: int64(int8(b[3])) * 8}
			if in.Op == frame.OpRegister {
				in.Reg2 = arch.Reg(b[3] % 31)
				in.Offset = 0
			}
			p.CFI = append(p.CFI, in)
		}
		err := a64sim.Check(p, a64sim.Options{})
		if err != nil && !errors.Is(err, a64sim.ErrCheck) && !errors.Is(err, a64sim.ErrUnsupported) {
			t.Fatalf("error of no kind: %v", err)
		}
		img, lerr := elfimage.Link(&elfimage.Module{Arch: arch.AArch64, File: "f.s", Procs: []*elfimage.Proc{p}}, elfimage.LinkOptions{})
		if lerr != nil {
			return // CFI the linker refuses (restore_state without remember_state, ...)
		}
		ef, ferr := elf.NewFile(bytes.NewReader(img))
		if ferr != nil {
			t.Fatal(ferr)
		}
		eh := ef.Section(".eh_frame")
		data, _ := eh.Data()
		fdes, ferr := frame.NewEHFrame(data, eh.Addr, binary.LittleEndian, 8).FDEs()
		if ferr != nil || len(fdes) != 1 {
			t.Fatal(len(fdes), ferr)
		}
		rows, terr := frame.Table(&fdes[0])
		if terr != nil {
			if err == nil {
				t.Fatalf("Check passes CFI whose linked table fails: %v", terr)
			}
			return
		}
		start := fdes[0].Start
		err2 := a64sim.CheckTable("f", img[start:start+uint64(len(code))], start, rows, a64sim.Options{})
		if (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("Check: %v\nCheckTable on the image: %v", err, err2)
		}
	})
}
