package main

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/symbolize"
	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"
)

// dumpDisasm prints the code of every SHF_EXECINSTR section of any ELF
// file (x86-64 or AArch64), or only the function named proc, with the
// debug view of each instruction. Before each symbol's first
// instruction a label "<address> <name>:" as objdump -d prints it; then
// per instruction one line of tab-separated fields:
//
//	address:  bytes (hex)  instruction  ; file:line:column  cfa=RULE reg=RULE...  live NAME=LOCATION...
//
// The instruction is in GNU (AT&T) syntax for x86-64, as objdump prints
// it (x86asm.GNUSyntax), and GNU syntax for AArch64
// (arm64asm.GNUSyntax), mnemonics spelled as binutils 2.38's objdump
// spells them (see gnuX86; endbr64, vzeroupper, rdpkru and wrpkru, which
// x86asm lacks or mis-sizes, decoded here; rdseed, as in libc.so.6, is
// not, and prints "(bad)"); bytes that do not decode print "(bad)" (x86-64,
// one byte) or ".inst 0x…" (AArch64, four bytes). The source position is
// the innermost frame's (package symbolize: the line row at or before
// the address; inlined frames are not shown), left out when unknown. The
// CFA rule and register rules are those of the call frame table row
// covering the address (package dwarf/frame, the FDE of .eh_frame, else
// of .debug_frame), spelled as -frames-interp spells them (rsp+8, c-16,
// s, u, exp; the return-address column as "ra"); unspecified rules are
// left out and no "cfa=" appears where no FDE covers the address. For an
// image of ours (isImage), the parameters and variables live at the
// address (Image.Locals) follow with their locations as describe prints
// them. An address is a link-time address; a relocatable object's
// sections each start at 0.
//
// Errors: a machine other than EM_X86_64 and EM_AARCH64; -proc naming no
// function symbol and no procedure; unreadable sections.
func dumpDisasm(w io.Writer, path, proc string, img *elfimage.Image) error {
	f, err := elfobj.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 && f.Machine != elf.EM_AARCH64 {
		return fmt.Errorf("%s: -disasm decodes EM_X86_64 and EM_AARCH64 code, not %v", path, f.Machine)
	}
	sym, err := symbolize.Open(path)
	if err != nil {
		sym = nil // no positions
	} else {
		defer sym.Close()
	}
	labels, err := codeLabels(f)
	if err != nil {
		return err
	}
	cfi, err := loadCFI(f)
	if err != nil {
		return err
	}
	d := &disassembler{f: f, sym: sym, img: img, cfi: cfi, labels: labels, names: newRegNames(f.Machine)}
	d.rules = &tablePrinter{names: d.names}
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	d.w = bw

	var lo, hi uint64 // the -proc range
	procSec := -1
	if proc != "" {
		found := false
		for _, l := range labels {
			if l.name == proc && l.isFunc {
				lo, hi, procSec, found = l.addr, l.addr+l.size, l.section, true
				break
			}
		}
		if !found && img != nil {
			if procs, err := img.Procedures(); err == nil {
				for _, p := range procs {
					if p.Name == proc {
						lo, hi, found = p.Start, p.Start+p.Size, true
						break
					}
				}
			}
		}
		if !found {
			return fmt.Errorf("%s: -proc %s: no function symbol or procedure of that name", path, proc)
		}
		if hi == lo {
			hi = lo + 1 // a symbol of size 0: its first instruction
		}
	}
	for i, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 || s.Type == elf.SHT_NOBITS || s.Size == 0 {
			continue
		}
		if proc != "" && (procSec >= 0 && procSec != i || procSec < 0 && (lo < s.Addr || lo >= s.Addr+s.Size)) {
			continue
		}
		data, err := f.SectionData(i)
		if err != nil {
			return fmt.Errorf("%s: section %s: %w", path, s.Name, err)
		}
		start, end := s.Addr, s.Addr+uint64(len(data))
		if proc != "" {
			start, end = max(start, lo), min(end, hi)
		} else {
			fmt.Fprintf(bw, "\nDisassembly of section %s:\n", s.Name)
		}
		var secLabels []codeLabel
		for _, l := range labels {
			if l.section == i {
				secLabels = append(secLabels, l)
			}
		}
		if err := d.section(data, s.Addr, start, end, secLabels); err != nil {
			return err
		}
	}
	return nil
}

// disassembler holds what disassembling one file reuses.
type disassembler struct {
	w      *bufio.Writer
	f      *elfobj.File
	sym    *symbolize.Symbolizer
	img    *elfimage.Image
	cfi    []frame.ParsedFDE // sorted by Start
	exec   frame.Exec
	row    frame.Row
	labels []codeLabel // sorted by address
	names  *regNames
	rules  *tablePrinter
	// frames is reused by Symbolize.
	frames []symbolize.Frame
}

// section disassembles [start, end) of a section loaded at addr.
func (d *disassembler) section(data []byte, addr, start, end uint64, labels []codeLabel) error {
	li := sort.Search(len(labels), func(i int) bool { return labels[i].addr >= start })
	pc := start
	for pc < end {
		next := end
		for li < len(labels) && labels[li].addr <= pc {
			if labels[li].addr == pc {
				fmt.Fprintf(d.w, "\n%016x <%s>:\n", pc, labels[li].name)
			}
			li++
		}
		if li < len(labels) && labels[li].addr < next {
			next = labels[li].addr
		}
		code := data[pc-addr : next-addr]
		text, n := d.decode(code, pc)
		d.line(pc, code[:n], text)
		pc += uint64(n)
	}
	return nil
}

// decode decodes one instruction at the start of code, at address pc.
func (d *disassembler) decode(code []byte, pc uint64) (string, int) {
	if d.f.Machine == elf.EM_X86_64 {
		if len(code) >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && (code[3] == 0xfa || code[3] == 0xfb) {
			if code[3] == 0xfa {
				return "endbr64", 4 // x86asm does not know CET's endbr
			}
			return "endbr32", 4
		}
		if len(code) >= 3 && code[0] == 0xc5 && (code[1] == 0xf8 || code[1] == 0xfc) && code[2] == 0x77 {
			if code[1] == 0xf8 {
				return "vzeroupper", 3 // x86asm takes a fourth byte
			}
			return "vzeroall", 3
		}
		if len(code) >= 3 && code[0] == 0x0f && code[1] == 0x01 && (code[2] == 0xee || code[2] == 0xef) {
			if code[2] == 0xee {
				return "rdpkru", 3 // not in x86asm
			}
			return "wrpkru", 3
		}
		in, err := x86asm.Decode(code, 64)
		if err != nil || in.Len == 0 {
			return "(bad)", 1
		}
		return d.gnuX86(in, code[:in.Len], pc), in.Len
	}
	if len(code) < 4 {
		return ".byte", len(code)
	}
	word := uint32(code[0]) | uint32(code[1])<<8 | uint32(code[2])<<16 | uint32(code[3])<<24 // A64 code is little-endian
	if word>>16 == 0 {
		return fmt.Sprintf("udf #%d", word), 4
	}
	if word&^(0x7f<<5) == 0xd503201f { // HINT #imm: the names objdump gives
		if name, ok := arm64Hints[(word>>5)&0x7f]; ok {
			return name, 4
		}
	}
	in, err := arm64asm.Decode(code[:4])
	if err != nil {
		return fmt.Sprintf(".inst\t0x%08x", word), 4
	}
	text := arm64asm.GNUSyntax(in)
	for _, a := range in.Args {
		if rel, ok := a.(arm64asm.PCRel); ok && in.Op != arm64asm.ADR && in.Op != arm64asm.ADRP {
			// objdump's spelling of a branch target: the address and its label.
			m, _, _ := strings.Cut(text, " ")
			ops := strings.Fields(strings.ReplaceAll(text[len(m):], ",", " "))
			t := pc + uint64(int64(rel))
			ops[len(ops)-1] = strconv.FormatUint(t, 16) + d.symbolOf(t)
			text = m + " " + strings.Join(ops, ", ")
			break
		}
	}
	return text, 4
}

// arm64Hints are the names of HINT instructions (pointer
// authentication, BTI) that arm64asm prints as "hint #N".
var arm64Hints = map[uint32]string{7: "xpaclri", 8: "pacia1716", 10: "pacib1716", 12: "autia1716", 14: "autib1716",
	16: "esb", 20: "csdb", 24: "paciaz", 25: "paciasp", 26: "pacibz", 27: "pacibsp", 28: "autiaz", 29: "autiasp",
	30: "autibz", 31: "autibsp", 32: "bti", 34: "bti c", 36: "bti j", 38: "bti jc"}

// gnuX86 spells an x86-64 instruction as objdump (binutils 2.38 and
// later) does: x86asm.GNUSyntax, without the q suffix of call, ret, jmp,
// push, pop and leave, notrack for a 3e prefix on an indirect branch, the multi-byte nops' prefixes as objdump names them
// ("cs nopw", "data16", "xchg %ax,%ax"), and a direct branch's target as
// "ADDRESS <symbol+offset>".
func (d *disassembler) gnuX86(in x86asm.Inst, code []byte, pc uint64) string {
	text := x86asm.GNUSyntax(in, pc, nil)
	// x86asm writes prefixes as words before the mnemonic, and no space
	// inside the operands.
	words := strings.Fields(text)
	var pre []string
	for len(words) > 1 && x86PrefixWord[words[0]] {
		pre, words = append(pre, words[0]), words[1:]
	}
	m, ops := "", ""
	if len(words) > 0 {
		m, ops = words[0], strings.Join(words[1:], " ")
	}
	switch m {
	case "retq", "callq", "jmpq", "pushq", "popq", "leaveq":
		m = strings.TrimSuffix(m, "q")
	case "movsxd": // x86asm keeps Intel's names for these
		m = "movslq"
	case "cdqe":
		m = "cltq"
	case "cwde":
		m = "cwtl"
	case "cbw":
		m = "cbtw"
	case "cqo":
		m = "cqto"
	case "cdq":
		m = "cltd"
	case "cwd":
		m = "cwtd"
	case "mov":
		if isMovabs(code) {
			m = "movabs"
		}
	case "xbeginq":
		m = "xbegin"
	case "sarxl", "sarxq", "shlxl", "shlxq", "shrxl", "shrxq", "rorxl", "rorxq", "blsmskl", "blsmskq",
		"blsrl", "blsrq", "blsil", "blsiq", "bzhil", "bzhiq", "andnl", "andnq", "pdepl", "pdepq",
		"pextl", "pextq", "mulxl", "mulxq", "bextrl", "bextrq":
		m = m[:len(m)-1] // BMI: objdump gives no size suffix
	case "vpcmpb", "vpcmpw", "vpcmpd", "vpcmpq", "vpcmpub", "vpcmpuw", "vpcmpud", "vpcmpuq":
		// AVX-512 compares with a predicate objdump names: vpcmpeqb, vpcmpltub...
		if imm, rest, ok := strings.Cut(ops, ","); ok && len(imm) == 4 && imm[:3] == "$0x" && imm[3] >= '0' && imm[3] <= '7' {
			pred := [...]string{"eq", "lt", "le", "false", "neq", "nlt", "nle", "true"}[imm[3]-'0']
			m = "vpcmp" + pred + m[len("vpcmp"):]
			ops = rest
		}
	}
	for i, p := range pre {
		switch {
		case p == "ds" && (in.Op == x86asm.JMP || in.Op == x86asm.CALL):
			pre[i] = "notrack" // CET's no-track prefix (3e)
		case p == "rep" && in.Op == x86asm.RET:
			pre[i] = "repz"
		}
	}
	if in.Op == x86asm.CALL && len(code) > 5 && code[len(code)-5] == 0xe8 && code[len(code)-6] == 0x48 {
		// The TLS general-dynamic call (66 66 48 e8): objdump names every
		// prefix byte.
		pre = pre[:0]
		for _, c := range code[:len(code)-6] {
			if c == 0x66 {
				pre = append(pre, "data16")
			}
		}
		pre = append(pre, "rex.W")
	}
	if in.Op == x86asm.NOP {
		pre = nil
		if len(code) == 2 && code[0] == 0x66 {
			return "xchg %ax,%ax"
		}
		i := 0
		for ; i < len(code) && (code[i] == 0x66 || code[i] == 0x2e); i++ {
		}
		prefixes := code[:i]
		if n := strings.Count(string(prefixes), "\x66"); n > 1 {
			for k := 1; k < n; k++ {
				pre = append(pre, "data16")
			}
		}
		if strings.Contains(string(prefixes), "\x2e") {
			pre = append(pre, "cs")
		}
		// x86asm spells the prefixes as words before the mnemonic and
		// the segment in the operand: keep only the nop and its operand.
		words := strings.Fields(text)
		for len(words) > 0 && !strings.HasPrefix(words[0], "nop") {
			words = words[1:]
		}
		if len(words) > 0 {
			m, ops = words[0], strings.Replace(strings.Join(words[1:], " "), "%cs:", "", 1)
		}
	}
	for _, a := range in.Args {
		if rel, ok := a.(x86asm.Rel); ok {
			t := pc + uint64(in.Len) + uint64(int64(rel))
			ops = strconv.FormatUint(t, 16) + d.symbolOf(t)
		}
	}
	if len(pre) > 0 {
		m = strings.Join(pre, " ") + " " + m
	}
	if ops == "" {
		return m
	}
	return m + " " + ops
}

// x86PrefixWord are the prefixes x86asm.GNUSyntax writes as words.
var x86PrefixWord = map[string]bool{"data16": true, "data32": true, "addr16": true, "addr32": true, "cs": true, "ds": true,
	"es": true, "ss": true, "fs": true, "gs": true, "rep": true, "repn": true, "repne": true, "lock": true, "xacquire": true,
	"xrelease": true, "rex": true, "rex.W": true, "bnd": true, "pn": true, "pt": true}

// isMovabs reports whether code is a mov with a 64-bit immediate (REX.W
// B8+r) or a 64-bit absolute address (A0-A3 without an address-size
// prefix), which objdump calls movabs.
func isMovabs(code []byte) bool {
	i, addr32, rexW := 0, false, false
	for ; i < len(code); i++ {
		c := code[i]
		switch {
		case c == 0x67:
			addr32 = true
			continue
		case c == 0x66 || c == 0xf2 || c == 0xf3 || c == 0xf0 || c == 0x2e || c == 0x3e || c == 0x26 || c == 0x36 || c == 0x64 || c == 0x65:
			continue
		case c&0xf0 == 0x40:
			rexW = c&8 != 0
			continue
		}
		break
	}
	if i >= len(code) {
		return false
	}
	c := code[i]
	return c >= 0xb8 && c <= 0xbf && rexW || c >= 0xa0 && c <= 0xa3 && !addr32
}

// symbolOf spells the label covering addr as objdump does: " <name>" or
// " <name+0xOFF>", or "" when no label is at or before addr or addr is
// past that label's size.
func (d *disassembler) symbolOf(addr uint64) string {
	i := sort.Search(len(d.labels), func(i int) bool { return d.labels[i].addr > addr }) - 1
	if i < 0 {
		return ""
	}
	l := d.labels[i]
	if l.size > 0 && addr-l.addr >= l.size {
		return "" // past the symbol's end (a PLT entry: objdump's synthetic name@plt is not made)
	}
	if l.addr == addr {
		return " <" + l.name + ">"
	}
	return fmt.Sprintf(" <%s+%#x>", l.name, addr-l.addr)
}

// line prints one instruction with its debug view.
func (d *disassembler) line(pc uint64, code []byte, text string) {
	b := d.rules.buf[:0]
	b = append(b, "  "...)
	b = strconv.AppendUint(b, pc, 16)
	b = append(b, ":\t"...)
	n := len(b)
	for i, c := range code {
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendHex(b, uint64(c), 2)
	}
	b = pad(b, n+20)
	b = append(b, '\t')
	n = len(b)
	b = append(b, text...)
	b = pad(b, n+32)
	b = append(b, "\t;"...)
	if d.sym != nil {
		if fr, err := d.sym.Symbolize(pc, d.frames[:0]); err == nil && len(fr) > 0 && fr[0].Line > 0 {
			d.frames = fr
			b = append(b, ' ')
			b = append(b, fr[0].File...)
			b = append(b, ':')
			b = strconv.AppendUint(b, uint64(fr[0].Line), 10)
			b = append(b, ':')
			b = strconv.AppendUint(b, uint64(fr[0].Column), 10)
		}
	}
	if r, ra := d.rowAt(pc); r != nil {
		b = append(b, "  cfa="...)
		b = d.rules.appendRule(b, r.CFA)
		for j := 0; j < r.NumRules(); j++ {
			reg, rule := r.RuleAt(j)
			if rule.Kind == frame.RuleUnspecified {
				continue
			}
			b = append(b, ' ')
			if reg == ra {
				b = append(b, "ra"...)
			} else {
				b = append(b, d.names.name(reg)...)
			}
			b = append(b, '=')
			b = d.rules.appendRule(b, rule)
		}
	}
	if d.img != nil {
		if ls, err := d.img.Locals(pc); err == nil && len(ls) > 0 {
			b = append(b, "  live"...)
			for _, l := range ls {
				b = append(b, ' ')
				b = append(b, l.Name...)
				b = append(b, '=')
				b = append(b, exprString(l.Location)...)
			}
		}
	}
	b = append(b, '\n')
	d.rules.buf = b
	d.w.Write(b)
}

// rowAt returns the call frame table row covering pc and its FDE's
// return-address column, or nil: of the FDEs covering pc, the last to
// start (in a relocatable object, every section's FDEs start at 0; the
// innermost range wins).
func (d *disassembler) rowAt(pc uint64) (*frame.Row, arch.Reg) {
	i := sort.Search(len(d.cfi), func(i int) bool { return d.cfi[i].Start > pc })
	for i--; i >= 0; i-- {
		fde := &d.cfi[i]
		if pc < fde.Start+fde.Size {
			if err := d.exec.RowAt(fde, pc, &d.row); err != nil {
				return nil, 0
			}
			return &d.row, fde.CIE.RA
		}
	}
	return nil, 0
}

// codeLabel is a symbol naming code: a label objdump would print.
type codeLabel struct {
	name       string
	addr, size uint64
	section    int
	isFunc     bool
}

// codeLabels returns the named STT_FUNC, STT_GNU_IFUNC and STT_NOTYPE
// symbols of .symtab (or .dynsym without one) defined in SHF_EXECINSTR
// sections, sorted by address, one per address (a function symbol
// preferred); AArch64 and Arm mapping symbols ($x, $d...) are left out.
func codeLabels(f *elfobj.File) ([]codeLabel, error) {
	i := f.FindSectionType(elf.SHT_SYMTAB)
	if i < 0 {
		i = f.FindSectionType(elf.SHT_DYNSYM)
	}
	if i < 0 {
		return nil, nil
	}
	t, err := f.Symbols(i)
	if err != nil {
		return nil, err
	}
	var out []codeLabel
	for j := 1; j < t.Len(); j++ {
		s := t.Sym(j)
		typ := s.Type()
		if typ != elf.STT_FUNC && typ != elf.STT_NOTYPE && typ != elf.STT_GNU_IFUNC {
			continue
		}
		sec, ok := t.SectionOf(j)
		if !ok || sec <= 0 || sec >= len(f.Sections) || f.Sections[sec].Flags&elf.SHF_EXECINSTR == 0 {
			continue
		}
		name, err := t.Name(j)
		if err != nil || name == "" || strings.HasPrefix(name, "$") {
			continue
		}
		out = append(out, codeLabel{name: name, addr: s.Value, size: s.Size, section: sec, isFunc: typ != elf.STT_NOTYPE})
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].addr != out[b].addr {
			return out[a].addr < out[b].addr
		}
		return out[a].isFunc && !out[b].isFunc
	})
	k := 0
	for _, l := range out {
		if k > 0 && out[k-1].addr == l.addr && out[k-1].section == l.section {
			continue
		}
		out[k] = l
		k++
	}
	return out[:k], nil
}

// loadCFI returns every FDE of .eh_frame and then .debug_frame, sorted by
// start address; an FDE of .debug_frame is left out where one of
// .eh_frame starts at the same address.
func loadCFI(f *elfobj.File) ([]frame.ParsedFDE, error) {
	addrSize := uint8(8)
	if f.Class == elf.ELFCLASS32 {
		addrSize = 4
	}
	var out []frame.ParsedFDE
	seen := map[uint64]bool{}
	for _, name := range []string{".eh_frame", ".debug_frame"} {
		i := f.FindSection(name)
		if i < 0 || f.Sections[i].Type == elf.SHT_NOBITS {
			continue
		}
		data, err := f.Relocated(i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var sec *frame.Section
		if name == ".eh_frame" {
			sec = frame.NewEHFrame(data, f.Sections[i].Addr, f.ByteOrder, addrSize)
		} else {
			sec = frame.NewDebugFrame(data, f.ByteOrder, addrSize)
		}
		fdes, err := sec.FDEs()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var next []frame.ParsedFDE
		for _, fde := range fdes {
			if fde.Size > 0 && !seen[fde.Start] {
				next = append(next, fde)
			}
		}
		for _, fde := range next {
			seen[fde.Start] = true
		}
		out = append(out, next...)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Start < out[b].Start })
	return out, nil
}
