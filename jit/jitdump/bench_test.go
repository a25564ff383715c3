package jitdump

import (
	"io"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// benchFunction is a realistic JIT function: 200 bytes of code, 10 line
// entries in one source file, and the CFI of a push rbp; mov rbp, rsp frame
// left by leave; ret.
func benchFunction(addr uint64) *Function {
	code := make([]byte, 200)
	code[0], code[1], code[2], code[3] = 0x55, 0x48, 0x89, 0xe5 // push rbp; mov rbp, rsp
	code[198], code[199] = 0xc9, 0xc3                           // leave; ret
	lines := make([]Line, 10)
	for i := range lines {
		lines[i] = Line{Offset: uint64(i) * 20, Line: uint32(100 + i), File: "/home/user/project/src/module.scm"}
	}
	return &Function{
		Name:  "module.procedure_1234",
		Addr:  addr,
		Code:  code,
		Lines: lines,
		CFI: []frame.Insn{
			{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
			{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
			{PC: 4, Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP},
			{PC: 199, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},
		},
	}
}

// BenchmarkLoad measures publishing one function to a jitdump without a
// profiler attached: Writer.Load of benchFunction (DEBUG_INFO, UNWINDING_INFO
// with .eh_frame and .eh_frame_hdr encoded for it, CODE_LOAD: about 1 KiB in
// one write(2)), each at the next address its footprint allows. The file
// is cut back to its header every 64 Ki loads, outside the timing, so that
// the benchmark does not fill the disk; the writes go to the page cache.
// BenchmarkEncodeUnwinding times the encoding of the unwinding data alone.
func BenchmarkLoad(b *testing.B) {
	w, err := Open(b.TempDir(), &Options{Arch: arch.X86_64})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	f := benchFunction(0x7f0000000000)
	step, err := w.Footprint(f)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := w.Load(f); err != nil {
			b.Fatal(err)
		}
		f.Addr += step
		if n++; n == 64<<10 {
			b.StopTimer()
			if err := w.f.Truncate(HeaderSize); err != nil {
				b.Fatal(err)
			}
			if _, err := w.f.Seek(HeaderSize, io.SeekStart); err != nil {
				b.Fatal(err)
			}
			n = 0
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(len(w.buf)), "bytes/load")
}

// BenchmarkEncodeUnwinding is the part of BenchmarkLoad that encodes
// benchFunction's .eh_frame and .eh_frame_hdr.
func BenchmarkEncodeUnwinding(b *testing.B) {
	f := benchFunction(0x7f0000000000)
	cie := frame.StandardCIE(arch.X86_64)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := EncodeUnwinding(arch.X86_64, cie, f.Addr, uint64(len(f.Code)), f.CFI); err != nil {
			b.Fatal(err)
		}
	}
}
