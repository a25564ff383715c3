package procview

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/formaterr"
	"github.com/elfimage/elfimage/unwind"
)

// Note types of Linux core files that debug/elf does not name
// (include/uapi/linux/elf.h), and the auxiliary vector entries used here
// (include/uapi/linux/auxvec.h).
const (
	ntAUXV    = 6
	ntSIGINFO = 0x53494749 // "SIGI"
	ntFILE    = 0x46494c45 // "FILE"

	atNull        = 0
	atPHDR        = 3
	atPageSize    = 6
	atEntry       = 9
	atSysinfoEHDR = 33
)

// Layouts of the structures of core notes (include/linux/elfcore.h,
// include/uapi/linux/elfcore.h), in bytes. struct elf_prstatus is
// struct elf_prstatus_common (112 bytes on 64-bit Linux: the signal info,
// pr_cursig, the signal masks, the ids and four struct timevals), then
// pr_reg (elf_gregset_t: x86-64 struct user_regs_struct, 27 words;
// AArch64 struct user_pt_regs, 34 words), then int pr_fpvalid, padded to
// 8 bytes. struct elf_prpsinfo, siginfo_t, the auxiliary vector and NT_FILE
// have the same layout on both (unsigned long, 32-bit uid_t and pid_t).
const (
	prstatusSize        = 336 // x86-64 struct elf_prstatus
	prstatusSizeAArch64 = 392 // AArch64 struct elf_prstatus
	prstatusCursig      = 12  // short pr_cursig
	prstatusPID         = 32  // pid_t pr_pid
	prstatusReg         = 112 // elf_gregset_t pr_reg
	prpsinfoSize        = 136 // struct elf_prpsinfo
	prpsinfoUID         = 16  // __kernel_uid_t pr_uid (unsigned int)
	prpsinfoPID         = 24  // pid_t pr_pid
	prpsinfoFname       = 40  // char pr_fname[16]
	prpsinfoArgs        = 56  // char pr_psargs[80]
	siginfoSize         = 128 // siginfo_t
)

// Bounds on what is read from a core file (its contents are untrusted).
const (
	// MaxCoreSegments bounds the program headers of a core (one per
	// mapping: the kernel's vm.max_map_count is 65530 by default).
	MaxCoreSegments = 1 << 20
	// MaxCoreNoteBytes bounds the bytes of all PT_NOTE segments read.
	MaxCoreNoteBytes = 256 << 20
)

// ErrNotDumped is wrapped (with unwind.ErrMemory) by the errors of reading
// core memory that was mapped in the process but whose bytes are not in
// the core file: beyond a segment's p_filesz (the kernel and gcore leave
// out, for example, file-backed pages never written), or cut off where
// the file is truncated.
var ErrNotDumped = errors.New("procview: memory not dumped in the core file")

// Core is an ELF core file (gABI e_type ET_CORE) of an x86-64 or AArch64
// Linux process (read on any host), as the kernel writes it on a fatal signal (core(5)) and gdb's
// gcore writes it from a live process: its threads, mapped files,
// auxiliary vector and memory. It implements io.ReaderAt and
// unwind.SizedMemory over the process's memory (the offset of ReadAt is a
// run-time address), reading the file on demand; it is safe for
// concurrent use. NewCore and OpenCore decode it; Close releases the
// file OpenCore opened.
type Core struct {
	// Arch is the ABI of the process: arch.X86_64 (e_machine EM_X86_64)
	// or arch.AArch64 (EM_AARCH64).
	Arch *arch.Arch
	// PID is the process's id: NT_PRPSINFO's pr_pid, else the first
	// thread's.
	PID int
	// UID is the process's user id (NT_PRPSINFO pr_uid), -1 without
	// NT_PRPSINFO.
	UID int
	// Command is the process's name (NT_PRPSINFO pr_fname, the main
	// thread's comm, at most 15 bytes); Args the start of its command line
	// (pr_psargs: at most 80 bytes, arguments separated by spaces). Both
	// are empty without NT_PRPSINFO.
	Command, Args string
	// Threads are the threads, one per NT_PRSTATUS note, in the core's
	// order: the kernel and gdb put the thread that received the signal
	// first.
	Threads []CoreThread
	// Files are the file-backed mappings of NT_FILE, in its order
	// (ascending addresses as the kernel writes them).
	Files []CoreFile
	// PageSize is NT_FILE's page size in bytes (0 without NT_FILE).
	PageSize uint64
	// Segments are the PT_LOAD segments, sorted by address and disjoint.
	Segments []CoreSegment
	// Auxv is the auxiliary vector (NT_AUXV) without its AT_NULL end.
	Auxv []AuxEntry
	// Siginfo is the signal that caused the dump (NT_SIGINFO), nil when
	// the core has none.
	Siginfo *CoreSiginfo

	r      io.ReaderAt
	size   int64
	closer io.Closer
	warn   []error
}

// CoreThread is one thread of a core: NT_PRSTATUS's pr_pid, pr_cursig
// (the signal the thread was handling, 0 for none) and pr_reg, in Regs
// for an x86-64 core and in AArch64Regs for an AArch64 one (the other is
// zero).
type CoreThread struct {
	TID         int
	Signal      int
	Regs        UserRegs
	AArch64Regs UserPtRegs

	arch *arch.Arch // nil for x86-64
}

// Arch returns the ABI of the thread's registers (the Core's Arch).
func (t *CoreThread) Arch() *arch.Arch {
	if t.arch == nil {
		return arch.X86_64
	}
	return t.arch
}

// PC returns the thread's pc: rip on x86-64, pc on AArch64.
func (t *CoreThread) PC() uint64 {
	if t.Arch() == arch.AArch64 {
		return t.AArch64Regs.Pc
	}
	return t.Regs.Rip
}

// Frame returns the thread's innermost frame for unwinding with
// unwind.New(t.Arch(), ...): its registers in DWARF numbering
// (RegsFromUserRegs on x86-64, RegsFromUserPtRegs on AArch64) and its pc
// (PC). Cost: O(1).
func (t *CoreThread) Frame() unwind.Frame {
	if t.Arch() == arch.AArch64 {
		return unwind.FirstFrame(arch.AArch64, t.AArch64Regs.Pc, RegsFromUserPtRegs(&t.AArch64Regs))
	}
	return unwind.FirstFrame(arch.X86_64, t.Regs.Rip, RegsFromUserRegs(&t.Regs))
}

// CoreFile is one mapping of an NT_FILE note: the run-time range [Start,
// End) maps the file at Path from byte Offset (NT_FILE's page offset times
// its page size). Path is as the kernel printed it (d_path: a deleted file
// ends in " (deleted)").
type CoreFile struct {
	Start, End uint64
	Offset     uint64
	Path       string
}

// CoreSegment is one PT_LOAD segment of a core: the process's memory
// [Addr, Addr+Size) (p_vaddr, p_memsz) with permissions Flags, of which
// the first FileSize bytes (p_filesz) are at Offset (p_offset) in the file;
// the rest was not dumped. Present is how many of those FileSize bytes the
// file really holds (fewer when it is truncated).
type CoreSegment struct {
	Addr, Size       uint64
	Offset, FileSize uint64
	Present          uint64
	Flags            elf.ProgFlag
}

// End returns Addr+Size.
func (s *CoreSegment) End() uint64 { return s.Addr + s.Size }

// AuxEntry is one entry of the auxiliary vector (getauxval(3)): a type
// (AT_*) and its value.
type AuxEntry struct{ Type, Value uint64 }

// CoreSiginfo is the start of the siginfo_t of NT_SIGINFO: the signal
// number, errno and code, and, for SIGSEGV, SIGBUS, SIGILL, SIGFPE and
// SIGTRAP, the faulting address (si_addr; 0 for other signals).
type CoreSiginfo struct {
	Signo, Errno, Code int32
	Addr               uint64
}

// OpenCore opens and decodes the core file at path (see NewCore); the
// Core keeps the file open until Close. Errors: those of os.Open, and of
// NewCore.
func OpenCore(path string) (*Core, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	c, err := NewCore(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("procview: core file %s: %w", path, err)
	}
	c.closer = f
	return c, nil
}

// Close closes the file OpenCore opened (nothing for NewCore). The Core,
// and any View made from it, must not be used afterwards.
func (c *Core) Close() error {
	if c.closer == nil {
		return nil
	}
	return c.closer.Close()
}

// Warnings returns what NewCore found wrong without failing: PT_LOAD
// segments that the file, truncated, holds only in part (one warning for
// all of them).
func (c *Core) Warnings() []error { return c.warn }

// Aux returns the value of the first auxiliary vector entry of type typ.
func (c *Core) Aux(typ uint64) (uint64, bool) {
	for _, a := range c.Auxv {
		if a.Type == typ {
			return a.Value, true
		}
	}
	return 0, false
}

// Segment returns the PT_LOAD segment holding address addr, or nil. Cost:
// O(log segments).
func (c *Core) Segment(addr uint64) *CoreSegment {
	i := sort.Search(len(c.Segments), func(i int) bool { return c.Segments[i].End() > addr })
	if i < len(c.Segments) && c.Segments[i].Addr <= addr {
		return &c.Segments[i]
	}
	return nil
}

func coreErr(section string, off uint64, field, msg string) error {
	return &formaterr.Error{Source: section, Offset: off, Field: field, Msg: msg}
}

// NewCore decodes the core file r of size bytes: the ELF64 little-endian
// header (gABI "ELF Header"; e_type ET_CORE, e_machine EM_X86_64 or
// EM_AARCH64, whatever the host's architecture), the
// program headers (e_phnum PN_XNUM takes the count from section header
// 0's sh_info, gABI "Extended Program Header Numbering"), the PT_LOAD
// segments, and the notes of the PT_NOTE segments (gABI "Note Section"):
// NT_PRSTATUS (one thread each: the machine's struct elf_prstatus, whose
// pr_reg is x86-64 struct user_regs_struct or AArch64 struct
// user_pt_regs), NT_PRPSINFO,
// NT_AUXV, NT_FILE (count, page size, count (start, end, page offset)
// triples, then count NUL-terminated names) and NT_SIGINFO, all with
// owner "CORE"; other notes (registers of other kinds, "LINUX" notes) are
// skipped. The header, program headers and notes are decoded by package
// elfobj. Memory is not read: ReadAt reads it on demand.
//
// Errors are *formaterr.Error naming the file offset and the field,
// with Source "core header", "ELF header" (elfobj's checks of the program
// header table), "core program headers", "core notes", or the
// note type ("NT_PRSTATUS", "NT_FILE", ...): not a core, another machine,
// bounds exceeded (MaxCoreSegments, MaxCoreNoteBytes, MaxThreads),
// overlapping segments, malformed notes, a core without threads, program
// headers or notes beyond the end of the file (a truncated core). PT_LOAD
// segments cut by the end of the file are not an error: reads of their
// missing bytes fail (ErrNotDumped), and Warnings lists them. Cost: reads
// the headers and the notes; allocates O(segments + notes).
func NewCore(r io.ReaderAt, size int64) (*Core, error) {
	c := &Core{r: r, size: size, UID: -1}
	h, err := readHeader(r, "core header", "cores")
	if err != nil {
		return nil, err
	}
	if h.Type != elf.ET_CORE {
		return nil, coreErr("core header", 16, "e_type", fmt.Sprintf("%v, want ET_CORE: not a core file", h.Type))
	}
	switch h.Machine {
	case elf.EM_X86_64, elf.EM_AARCH64:
		c.Arch = arch.ForMachine(h.Machine)
	default:
		return nil, coreErr("core header", 18, "e_machine", fmt.Sprintf("%v: only x86-64 and AArch64 cores are supported", h.Machine))
	}
	phdrs, err := h.ReadProgs(r, size, MaxCoreSegments)
	if err != nil {
		return nil, err
	}
	var notes []byte
	cut, firstCut := 0, ""                      // segments cut by the end of the file
	type noteSeg struct{ off, start, n uint64 } // file offset, position in notes, length
	var noteSegs []noteSeg
	for i, p := range phdrs {
		off := h.Phoff + uint64(i)*uint64(h.Phentsize)
		typ, flags := p.Type, p.Flags
		pOff, vaddr, filesz, memsz := p.Off, p.Vaddr, p.Filesz, p.Memsz
		switch typ {
		case elf.PT_LOAD:
			if memsz == 0 {
				continue
			}
			if vaddr+memsz < vaddr {
				return nil, coreErr("core program headers", off+40, "p_memsz", fmt.Sprintf("segment %d: [%#x, +%#x) wraps around the address space", i, vaddr, memsz))
			}
			if filesz > memsz {
				return nil, coreErr("core program headers", off+32, "p_filesz", fmt.Sprintf("segment %d: %#x is more than p_memsz %#x", i, filesz, memsz))
			}
			if pOff+filesz < pOff {
				return nil, coreErr("core program headers", off+8, "p_offset", fmt.Sprintf("segment %d: %#x + p_filesz %#x wraps around", i, pOff, filesz))
			}
			s := CoreSegment{Addr: vaddr, Size: memsz, Offset: pOff, FileSize: filesz, Present: filesz, Flags: flags}
			if filesz > 0 && pOff+filesz > uint64(size) {
				s.Present = 0
				if pOff < uint64(size) {
					s.Present = uint64(size) - pOff
				}
				cut++
				if cut == 1 {
					firstCut = fmt.Sprintf("[%#x, %#x), which needs file bytes [%#x, %#x)", vaddr, vaddr+memsz, pOff, pOff+filesz)
				}
			}
			c.Segments = append(c.Segments, s)
		case elf.PT_NOTE:
			if filesz == 0 {
				continue
			}
			if pOff > uint64(size) || uint64(size)-pOff < filesz {
				return nil, coreErr("core program headers", off+8, "p_offset", fmt.Sprintf("PT_NOTE segment %d: bytes [%#x, %#x) are beyond the end of the file (%d bytes): truncated core", i, pOff, pOff+filesz, size))
			}
			if uint64(len(notes))+filesz > MaxCoreNoteBytes {
				return nil, coreErr("core program headers", off+32, "p_filesz", fmt.Sprintf("PT_NOTE segments of more than %d bytes", MaxCoreNoteBytes))
			}
			start := uint64(len(notes))
			notes = append(notes, make([]byte, filesz)...)
			if n, err := r.ReadAt(notes[start:], int64(pOff)); uint64(n) < filesz {
				return nil, coreErr("core notes", pOff, "p_offset", fmt.Sprintf("read %d of %d bytes: %v", n, filesz, err))
			}
			noteSegs = append(noteSegs, noteSeg{pOff, start, filesz})
		}
	}
	if cut > 0 {
		c.warn = append(c.warn, fmt.Errorf("procview: core file truncated at %d bytes: %d of %d segments are cut, the first %s; what they lack reads as not dumped", size, cut, len(c.Segments), firstCut))
	}
	sort.SliceStable(c.Segments, func(i, j int) bool { return c.Segments[i].Addr < c.Segments[j].Addr })
	for i := 1; i < len(c.Segments); i++ {
		if p, s := &c.Segments[i-1], &c.Segments[i]; s.Addr < p.End() {
			return nil, coreErr("core program headers", h.Phoff, "p_vaddr", fmt.Sprintf("PT_LOAD segments [%#x, %#x) and [%#x, %#x) overlap", p.Addr, p.End(), s.Addr, s.End()))
		}
	}
	var seen noteSeen
	for _, ns := range noteSegs {
		if err := c.decodeNotes(notes[ns.start:ns.start+ns.n], ns.off, &seen); err != nil {
			return nil, err
		}
	}
	if len(c.Threads) == 0 {
		return nil, coreErr("core notes", 0, "NT_PRSTATUS", "no NT_PRSTATUS note: the core has no threads")
	}
	if c.PID == 0 {
		c.PID = c.Threads[0].TID
	}
	return c, nil
}

// noteSeen records which notes of which only the first counts have been
// decoded, across PT_NOTE segments.
type noteSeen struct{ psinfo, file, auxv bool }

// decodeNotes decodes the notes of one PT_NOTE segment, b, found at file
// offset base (read by elfobj's NoteReader: each an Elf64_Nhdr, the name
// and the descriptor, each padded to 4 bytes as Linux writes them).
func (c *Core) decodeNotes(b []byte, base uint64, seen *noteSeen) error {
	le := binary.LittleEndian
	r := elfobj.NewNoteReader(b, base, elf.ELFDATA2LSB, 4, "core notes")
	for n, ok := r.Next(); ok; n, ok = r.Next() {
		name, typ, desc, descAt := string(n.Name), uint32(n.Type), n.Desc, n.DescOffset
		if name != "CORE" {
			continue
		}
		var err error
		switch typ {
		case uint32(elf.NT_PRSTATUS):
			err = c.decodePRStatus(desc, descAt)
		case uint32(elf.NT_PRPSINFO):
			if !seen.psinfo {
				seen.psinfo = true
				err = c.decodePRPSInfo(desc, descAt)
			}
		case ntAUXV:
			if !seen.auxv {
				seen.auxv = true
				err = c.decodeAuxv(desc, descAt)
			}
		case ntFILE:
			if !seen.file {
				seen.file = true
				err = c.decodeFile(desc, descAt)
			}
		case ntSIGINFO:
			if c.Siginfo == nil && len(desc) >= 24 {
				si := &CoreSiginfo{Signo: int32(le.Uint32(desc)), Errno: int32(le.Uint32(desc[4:])), Code: int32(le.Uint32(desc[8:]))}
				switch si.Signo {
				case 4, 5, 7, 8, 11: // SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV
					si.Addr = le.Uint64(desc[16:])
				}
				c.Siginfo = si
			}
		}
		if err != nil {
			return err
		}
	}
	return r.Err()
}

func (c *Core) decodePRStatus(desc []byte, at uint64) error {
	want, regSize := prstatusSize, userRegsSize
	if c.Arch == arch.AArch64 {
		want, regSize = prstatusSizeAArch64, userPtRegsSize
	}
	if len(desc) != want {
		return coreErr("NT_PRSTATUS", at, "n_descsz", fmt.Sprintf("%d bytes, want %d (%s struct elf_prstatus)", len(desc), want, c.Arch.Name))
	}
	if len(c.Threads) == MaxThreads {
		return coreErr("NT_PRSTATUS", at, "pr_pid", fmt.Sprintf("more than %d threads", MaxThreads))
	}
	le := binary.LittleEndian
	t := CoreThread{TID: int(int32(le.Uint32(desc[prstatusPID:]))), Signal: int(int16(le.Uint16(desc[prstatusCursig:])))}
	if t.TID <= 0 {
		return coreErr("NT_PRSTATUS", at+prstatusPID, "pr_pid", fmt.Sprintf("thread id %d", t.TID))
	}
	var regs any = &t.Regs
	if c.Arch == arch.AArch64 {
		regs, t.arch = &t.AArch64Regs, arch.AArch64 // nil: x86-64
	}
	if _, err := binary.Decode(desc[prstatusReg:prstatusReg+regSize], le, regs); err != nil {
		return coreErr("NT_PRSTATUS", at+prstatusReg, "pr_reg", err.Error())
	}
	c.Threads = append(c.Threads, t)
	return nil
}

func (c *Core) decodePRPSInfo(desc []byte, at uint64) error {
	if len(desc) < prpsinfoSize {
		return coreErr("NT_PRPSINFO", at, "n_descsz", fmt.Sprintf("%d bytes, want %d (struct elf_prpsinfo)", len(desc), prpsinfoSize))
	}
	cstr := func(b []byte) string {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return string(bytes.TrimRight(b, " "))
	}
	if pid := int32(binary.LittleEndian.Uint32(desc[prpsinfoPID:])); pid > 0 {
		c.PID = int(pid)
	}
	c.UID = int(binary.LittleEndian.Uint32(desc[prpsinfoUID:]))
	c.Command = cstr(desc[prpsinfoFname:prpsinfoArgs])
	c.Args = cstr(desc[prpsinfoArgs:prpsinfoSize])
	return nil
}

func (c *Core) decodeAuxv(desc []byte, at uint64) error {
	if len(desc)%16 != 0 {
		return coreErr("NT_AUXV", at, "n_descsz", fmt.Sprintf("%d bytes, not a whole number of 16-byte entries", len(desc)))
	}
	le := binary.LittleEndian
	for i := 0; i < len(desc); i += 16 {
		t := le.Uint64(desc[i:])
		if t == atNull {
			break
		}
		c.Auxv = append(c.Auxv, AuxEntry{t, le.Uint64(desc[i+8:])})
	}
	return nil
}

func (c *Core) decodeFile(desc []byte, at uint64) error {
	le := binary.LittleEndian
	if len(desc) < 16 {
		return coreErr("NT_FILE", at, "count", fmt.Sprintf("%d bytes, too short for count and page size", len(desc)))
	}
	count, page := le.Uint64(desc), le.Uint64(desc[8:])
	if max := uint64(len(desc)-16) / 24; count > max {
		return coreErr("NT_FILE", at, "count", fmt.Sprintf("%d mappings, but the note has room for %d", count, max))
	}
	if page == 0 || page&(page-1) != 0 || page > 1<<30 {
		return coreErr("NT_FILE", at+8, "page_size", fmt.Sprintf("%#x is not a power of two of at most 1 GiB", page))
	}
	names := desc[16+count*24:]
	namesAt := at + 16 + count*24
	files := make([]CoreFile, 0, count)
	for i := uint64(0); i < count; i++ {
		q := desc[16+i*24:]
		start, end, pgoff := le.Uint64(q), le.Uint64(q[8:]), le.Uint64(q[16:])
		if end < start {
			return coreErr("NT_FILE", at+16+i*24, "end", fmt.Sprintf("mapping %d: end %#x before start %#x", i, end, start))
		}
		if pgoff > (1<<64-1)/page {
			return coreErr("NT_FILE", at+16+i*24+16, "file_ofs", fmt.Sprintf("mapping %d: page offset %#x overflows", i, pgoff))
		}
		j := bytes.IndexByte(names, 0)
		if j < 0 {
			return coreErr("NT_FILE", namesAt, "filename", fmt.Sprintf("mapping %d of %d has no NUL-terminated name", i, count))
		}
		files = append(files, CoreFile{Start: start, End: end, Offset: pgoff * page, Path: string(names[:j])})
		names, namesAt = names[j+1:], namesAt+uint64(j)+1
	}
	c.Files, c.PageSize = files, page
	return nil
}

// ReadAt implements io.ReaderAt over the process's memory: it reads
// len(p) bytes at run-time address addr from the PT_LOAD segments, across
// adjacent segments. A read that reaches memory the core does not hold
// returns the bytes before it and an error wrapping unwind.ErrMemory: also
// ErrNotDumped for bytes of a segment beyond its p_filesz or beyond the end
// of a truncated file; the error names the address and the segment. Cost:
// O(log segments) and one read of the file per segment touched.
func (c *Core) ReadAt(p []byte, addr int64) (int, error) {
	if addr < 0 {
		return 0, fmt.Errorf("%w: address %#x", unwind.ErrMemory, uint64(addr))
	}
	return c.read(p, uint64(addr))
}

// read is ReadAt at any address (ReadSized reaches the upper half of the
// address space, where the vsyscall page is, which int64 offsets cannot).
func (c *Core) read(p []byte, a uint64) (int, error) {
	n := 0
	for n < len(p) {
		cur := a + uint64(n)
		if cur < a {
			return n, fmt.Errorf("%w: %d bytes at %#x wrap around the address space", unwind.ErrMemory, len(p), a)
		}
		s := c.Segment(cur)
		if s == nil {
			return n, fmt.Errorf("%w: %#x is not in the core's memory (no PT_LOAD segment holds it)", unwind.ErrMemory, cur)
		}
		rel := cur - s.Addr
		if rel >= s.Present {
			if rel < s.FileSize {
				return n, fmt.Errorf("%w: %#x: %w: segment [%#x, %#x) is cut at %#x by the end of the truncated file", unwind.ErrMemory, cur, ErrNotDumped, s.Addr, s.End(), s.Addr+s.Present)
			}
			return n, fmt.Errorf("%w: %#x: %w: segment [%#x, %#x) has %#x of %#x bytes in the file (p_filesz, p_memsz)", unwind.ErrMemory, cur, ErrNotDumped, s.Addr, s.End(), s.FileSize, s.Size)
		}
		k := min(uint64(len(p)-n), s.Present-rel)
		m, err := c.r.ReadAt(p[n:n+int(k)], int64(s.Offset+rel))
		n += m
		if uint64(m) < k {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, fmt.Errorf("%w: %#x: reading the core file at %#x: %w", unwind.ErrMemory, a+uint64(n), s.Offset+rel+uint64(m), err)
		}
	}
	return n, nil
}

// ReadUint64 implements unwind.Memory. Errors are those of ReadAt.
func (c *Core) ReadUint64(addr uint64) (uint64, error) { return c.ReadSized(addr, 8) }

// ReadSized implements unwind.SizedMemory: size (1 to 8) bytes at addr,
// little-endian. Errors are those of ReadAt. Cost: one read of the file.
func (c *Core) ReadSized(addr uint64, size int) (uint64, error) {
	if size < 1 || size > 8 {
		return 0, fmt.Errorf("%w: bad size %d", unwind.ErrMemory, size)
	}
	var b [8]byte
	if _, err := c.read(b[:size], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}
