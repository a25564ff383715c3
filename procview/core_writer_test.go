package procview_test

import (
	"debug/elf"
	"encoding/binary"

	"github.com/elfimage/elfimage/procview"
)

// testCore describes a core file for writeCore, an encoder written for
// the tests from the formats (gABI, include/linux/elfcore.h), independent
// of the decoder: the same facts NewCore decodes, laid out as Linux does
// (ELF header, program headers with PT_NOTE first, the notes, then the
// segments' bytes).
type testCore struct {
	// Machine is e_machine: EM_X86_64 when 0, or EM_AARCH64 (the
	// threads' AArch64Regs are written then).
	Machine       elf.Machine
	PID           int
	UID           int
	Command, Args string
	NoPSInfo      bool
	Threads       []procview.CoreThread
	Files         []procview.CoreFile
	PageSize      uint64
	Auxv          []procview.AuxEntry
	Siginfo       *procview.CoreSiginfo
	Segs          []testSeg
	// Extra notes written after the thread notes (other owners or types,
	// which NewCore skips).
	Extra []testNote
}

// testSeg is one PT_LOAD segment: Data are its dumped bytes (p_filesz =
// len(Data)), Size its p_memsz (len(Data) when 0).
type testSeg struct {
	Addr  uint64
	Size  uint64
	Data  []byte
	Flags elf.ProgFlag
}

type testNote struct {
	Name string
	Type uint32
	Desc []byte
}

func (c *testCore) notes() []testNote {
	le := binary.LittleEndian
	var ns []testNote
	if !c.NoPSInfo {
		d := make([]byte, 136)
		le.PutUint32(d[16:], uint32(c.UID))
		le.PutUint32(d[24:], uint32(c.PID))
		copy(d[40:56], c.Command)
		copy(d[56:136], c.Args)
		ns = append(ns, testNote{"CORE", uint32(elf.NT_PRPSINFO), d})
	}
	for i, t := range c.Threads {
		if c.Machine == elf.EM_AARCH64 {
			// struct elf_prstatus of arch/arm64: the common part (112
			// bytes), user_pt_regs (34 words), pr_fpvalid, padding.
			d := make([]byte, 392)
			le.PutUint16(d[12:], uint16(t.Signal))
			le.PutUint32(d[32:], uint32(t.TID))
			le.PutUint32(d[36:], uint32(c.PID))
			r := t.AArch64Regs
			for j, v := range append(r.Regs[:], r.Sp, r.Pc, r.Pstate) {
				le.PutUint64(d[112+8*j:], v)
			}
			le.PutUint32(d[384:], 1) // pr_fpvalid
			ns = append(ns, testNote{"CORE", uint32(elf.NT_PRSTATUS), d})
			ns = append(ns, testNote{"CORE", uint32(elf.NT_FPREGSET), make([]byte, 528)}) // user_fpsimd_state
			ns = append(ns, testNote{"LINUX", 0x401, make([]byte, 8)})                    // NT_ARM_TLS
			continue
		}
		d := make([]byte, 336)
		le.PutUint16(d[12:], uint16(t.Signal))
		le.PutUint32(d[32:], uint32(t.TID))
		le.PutUint32(d[36:], uint32(c.PID)) // pr_ppid: not decoded
		r := t.Regs
		for j, v := range []uint64{r.R15, r.R14, r.R13, r.R12, r.Rbp, r.Rbx, r.R11, r.R10, r.R9, r.R8,
			r.Rax, r.Rcx, r.Rdx, r.Rsi, r.Rdi, r.Orig_rax, r.Rip, r.Cs, r.Eflags, r.Rsp, r.Ss,
			r.Fs_base, r.Gs_base, r.Ds, r.Es, r.Fs, r.Gs} {
			le.PutUint64(d[112+8*j:], v)
		}
		ns = append(ns, testNote{"CORE", uint32(elf.NT_PRSTATUS), d})
		ns = append(ns, testNote{"CORE", uint32(elf.NT_FPREGSET), make([]byte, 512)})
		if i == 0 && c.Siginfo != nil {
			s := make([]byte, 128)
			le.PutUint32(s, uint32(c.Siginfo.Signo))
			le.PutUint32(s[4:], uint32(c.Siginfo.Errno))
			le.PutUint32(s[8:], uint32(c.Siginfo.Code))
			le.PutUint64(s[16:], c.Siginfo.Addr)
			ns = append(ns, testNote{"CORE", 0x53494749, s})
		}
		ns = append(ns, testNote{"LINUX", 0x202, make([]byte, 64)}) // NT_X86_XSTATE
	}
	if c.Auxv != nil {
		var d []byte
		for _, a := range c.Auxv {
			d = le.AppendUint64(le.AppendUint64(d, a.Type), a.Value)
		}
		d = append(d, make([]byte, 16)...) // AT_NULL
		ns = append(ns, testNote{"CORE", 6, d})
	}
	if c.Files != nil {
		page := c.PageSize
		if page == 0 {
			page = 4096
		}
		d := le.AppendUint64(le.AppendUint64(nil, uint64(len(c.Files))), page)
		for _, f := range c.Files {
			d = le.AppendUint64(le.AppendUint64(le.AppendUint64(d, f.Start), f.End), f.Offset/page)
		}
		for _, f := range c.Files {
			d = append(append(d, f.Path...), 0)
		}
		ns = append(ns, testNote{"CORE", 0x46494c45, d})
	}
	return append(ns, c.Extra...)
}

func encodeNotes(ns []testNote) []byte {
	le := binary.LittleEndian
	var b []byte
	pad := func() {
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	for _, n := range ns {
		b = le.AppendUint32(b, uint32(len(n.Name)+1))
		b = le.AppendUint32(b, uint32(len(n.Desc)))
		b = le.AppendUint32(b, n.Type)
		b = append(append(b, n.Name...), 0)
		pad()
		b = append(b, n.Desc...)
		pad()
	}
	return b
}

// writeCore encodes c as an ELF64 x86-64 (or c.Machine) core file.
func writeCore(c *testCore) []byte {
	le := binary.LittleEndian
	notes := encodeNotes(c.notes())
	phnum := 1 + len(c.Segs)
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS], h[elf.EI_DATA], h[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1
	le.PutUint16(h[16:], uint16(elf.ET_CORE))
	m := c.Machine
	if m == 0 {
		m = elf.EM_X86_64
	}
	le.PutUint16(h[18:], uint16(m))
	le.PutUint32(h[20:], 1)
	le.PutUint64(h[32:], 64) // e_phoff
	le.PutUint16(h[52:], 64) // e_ehsize
	le.PutUint16(h[54:], 56) // e_phentsize
	le.PutUint16(h[56:], uint16(phnum))
	le.PutUint16(h[58:], 64) // e_shentsize
	out := h
	off := uint64(64 + 56*phnum)
	ph := func(typ elf.ProgType, flags elf.ProgFlag, o, vaddr, filesz, memsz, align uint64) {
		var p [56]byte
		le.PutUint32(p[0:], uint32(typ))
		le.PutUint32(p[4:], uint32(flags))
		le.PutUint64(p[8:], o)
		le.PutUint64(p[16:], vaddr)
		le.PutUint64(p[32:], filesz)
		le.PutUint64(p[40:], memsz)
		le.PutUint64(p[48:], align)
		out = append(out, p[:]...)
	}
	ph(elf.PT_NOTE, 0, off, 0, uint64(len(notes)), 0, 4)
	dataOff := off + uint64(len(notes))
	for _, s := range c.Segs {
		size := s.Size
		if size == 0 {
			size = uint64(len(s.Data))
		}
		ph(elf.PT_LOAD, s.Flags, dataOff, s.Addr, uint64(len(s.Data)), size, 1)
		dataOff += uint64(len(s.Data))
	}
	out = append(out, notes...)
	for _, s := range c.Segs {
		out = append(out, s.Data...)
	}
	return out
}
