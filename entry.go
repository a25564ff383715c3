package elfimage

import (
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/native"
)

// The entry image: the library's own entry frame for code called through
// native.Call.
//
// native.Call runs code on a library-owned stack: its trampoline (Go
// assembly) saves its Go SP and BP at the top of that stack, switches SP
// and calls. Go's call frame information for the trampoline describes its
// frame on the Go stack only, so a debugger that unwinds from the called
// code into the trampoline with the native SP computes garbage. Between
// the two sits the entry routine (native.SetEntry), a procedure of this
// image, which the linker writes like any other, with exact CFI that
// describes its caller, the trampoline, through the words the trampoline
// saved: its SP (the Go one), its BP and its return address. From there
// Go's own CFI and frame pointers go on into the Go code that called
// native.Call. The image is linked like a user's image (beforehand, see
// entryImageFor), loaded and registered the first time any image is
// loaded ([Open], [Load]), then
// installed with native.SetEntry; publish.GDB publishes it with the
// first image it publishes, and publish.PerfMapEntries and
// publish.JitdumpFunctions list its procedure with every image's, so gdb,
// lldb, perf, elfimage stack and [Backtrace] all see it with nothing
// written by the user. It stays for the life of the process: calls may be
// running through it at any time.
//
// Its FDE is a signal frame (CIE augmentation "S"). gdb refuses a caller
// frame whose CFA is below its callee's ("previous frame inner to this
// frame (corrupt stack?)", frame.c get_prev_frame_always_1) unless one of
// the two frames is not a normal frame or the caller's pc is in
// __morestack; Go stacks lie below the mmap'd native stacks, so only a
// frame gdb does not treat as normal lets it cross, and DWARF CFI can mark
// a frame so only through "S". gdb therefore shows the entry frame as
// "<signal handler called>"; lldb, perf and our unwinder show its name,
// EntryName. The other effect of "S", that the caller's pc is used as is
// rather than as a return address, is harmless here: the return address
// into the trampoline is an instruction of the trampoline either way.

// EntryName is the name of the entry routine in the entry image: the
// frame between the code called through native.Call and the Go frames
// that called it (the trampoline, then native.call, native.CallErr, ...).
// gdb shows it as "<signal handler called>" (see [EntryImage]).
const EntryName = "elfimage.entry"

// entryFile is the entry image's compile-unit name; entryPath is its
// [Image.Path], which names no file.
const (
	entryFile = "elfimage-entry"
	entryPath = "<elfimage entry image>"
)

// entryCode is the entry routine, at offsets:
//
//	0: 55        push rbp        the trampoline's BP, for frame-pointer walks
//	1: 48 89 e5  mov rbp, rsp
//	4: 41 ff d3  call r11        the function; its entry SP is EntrySP
//	7: 5d        pop rbp
//	8: c3        ret             to the trampoline, RAX untouched
var entryCode = []byte{0x55, 0x48, 0x89, 0xe5, 0x41, 0xff, 0xd3, 0x5d, 0xc3}

// native.EntryRoutineSPOffset and native.SavedSPOffset as they are on
// amd64, so that the x86-64 entry image links the same on every host
// (package native has the running GOARCH's only; TestEntrySPOffsets checks
// these against it on amd64, entry_aarch64.go's on arm64).
const (
	entryRoutineSPOffsetX86_64 = 40
	savedSPOffsetX86_64        = 16
)

// entryCFI returns the entry routine's call frame information. At its
// entry RSP is Top-40 (Top-native.EntryRoutineSPOffset), so with d the
// bytes pushed since then, every row says: CFA = rsp+8+d (Top-32, where
// the trampoline's SP was when it called), return address at CFA-8 (the
// standard CIE's rule), the caller's rsp = [rsp+d+24], the word at
// Top-native.SavedSPOffset (DW_CFA_val_expression), and rbp the same
// value before the push, at CFA-16 after it. Expressions are relative to
// rsp, which every unwinder recovers, rather than rbp, which the callee
// may not describe.
func entryCFI() []frame.Insn {
	savedSP := func(pc uint64, d int64) frame.Insn {
		off := d + entryRoutineSPOffsetX86_64 - savedSPOffsetX86_64
		e := dwarf.AppendSleb128([]byte{byte(dwarf.DW_OP_breg0) + byte(arch.X86_64_RSP)}, off)
		return frame.Insn{PC: pc, Op: frame.OpValExpression, Reg: arch.X86_64_RSP, Expr: append(e, byte(dwarf.DW_OP_deref))}
	}
	return []frame.Insn{
		savedSP(0, 0),
		{PC: 1, Op: frame.OpDefCFAOffset, Reg: arch.X86_64_RSP, Offset: 16},
		{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
		savedSP(1, 8),
		{PC: 8, Op: frame.OpDefCFAOffset, Reg: arch.X86_64_RSP, Offset: 8},
		{PC: 8, Op: frame.OpSameValue, Reg: arch.X86_64_RBP},
		savedSP(8, 0),
	}
}

// entryModule is the entry image's Module for the running program:
// entryModuleFor(hostArch), whose PageSize is the running kernel's when
// that is larger than the ABI's (AArch64 Linux built with 16 KiB or 64 KiB
// pages), since the loader refuses segments not aligned to the running
// kernel's page size (see arch.AArch64).
func entryModule() *Module { return entryModuleFor(hostArch) }

// entryModuleFor is the entry image's Module for a, x86-64 or AArch64
// (entry_aarch64.go); the tests link the AArch64 one on any host.
func entryModuleFor(a *arch.Arch) *Module {
	code, cfi := entryCode, entryCFI()
	if a.Machine == arch.AArch64.Machine {
		code, cfi = entryCodeAArch64, entryCFIAArch64()
	}
	return &Module{
		Arch:     a,
		File:     entryFile,
		Producer: "elfimage entry image",
		Entry:    EntryName,
		Procs: []*Proc{{
			Name:        EntryName,
			Code:        code,
			CFI:         cfi,
			SignalFrame: true,
			Internal:    true,
			Doc:         "The entry frame between code called through native.Call and its Go caller.",
		}},
	}
}

// The entry image as Link(entryModuleFor(a), LinkOptions{}) writes it for
// x86-64 and AArch64, linked beforehand (TestEntryImageLinked checks them
// against this tree's Link and rewrites them with -update-entry-images):
// the first Open loads these bytes instead of linking, so that a program
// that only loads images does not page in the linker's code (about 250
// KiB of its text in the process's RSS) nor keep the linker's pooled
// buffers (about 170 KiB of heap until two collections have passed).
var (
	//go:embed entry_x86_64.elf
	entryImageX86_64 []byte
	//go:embed entry_aarch64.elf
	entryImageAArch64 []byte
)

// entryImageFor returns the prelinked entry image for a (arch.X86_64 or
// arch.AArch64 themselves, with their 4 KiB pages), nil for another Arch,
// such as the copy of arch.AArch64 that arch.Host returns on a kernel of
// 16 KiB or 64 KiB pages. The slice is shared: not to be written.
func entryImageFor(a *arch.Arch) []byte {
	switch a {
	case arch.X86_64:
		return entryImageX86_64
	case arch.AArch64:
		return entryImageAArch64
	}
	return nil
}

// entryImg is the loaded entry image, nil until EntryImage succeeds;
// entryMu serializes its loading; entryErr, under entryMu, is a failure
// that no retry can mend (another entry routine is installed).
var (
	entryMu  sync.Mutex
	entryImg atomic.Pointer[Image]
	entryErr error
)

// EntryImage returns the library's entry image, whose one procedure,
// [EntryName], is the entry routine every native.Call passes through (see
// native.SetEntry), linking, loading and installing it on the first call.
// [Open] and [Load] call it before they load an image, so that code of
// any image called through native.Call unwinds into its Go caller in gdb,
// lldb, perf, `elfimage stack` and [Backtrace]; programs need not call it.
// The image is registered ([Lookup] finds it) but not listed by [Images];
// it cannot be closed ([Image.Close] returns [ErrEntryImage]); publish.GDB
// publishes it with the first image it publishes. A program that loads no
// image (for example one that publishes its code with package gdbjit
// only) gets the entry frame by calling publish.GDB() (no
// arguments) once. Outside amd64 and arm64 there is no entry routine:
// EntryImage returns nil and an error matching errors.ErrUnsupported.
//
// Errors: those of [Link] and [Load], retried by the next call, and
// native.ErrEntrySet (wrapped, returned by every later call) when the
// program installed an entry routine of its own with native.SetEntry
// before: that one stays, and [Open] and [Load] go on without the entry
// image. Cost: the first call loads a one-procedure image linked
// beforehand (a copy into three pages of anonymous memory, microseconds;
// on a kernel of 16 KiB or 64 KiB pages, linked then, about 0.3 ms);
// later calls cost one atomic load.
func EntryImage() (*Image, error) {
	if im := entryImg.Load(); im != nil {
		return im, nil
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		return nil, fmt.Errorf("elfimage: no entry routine on %s: %w", runtime.GOARCH, errors.ErrUnsupported)
	}
	entryMu.Lock()
	defer entryMu.Unlock()
	if im := entryImg.Load(); im != nil {
		return im, nil
	}
	if entryErr != nil {
		return nil, entryErr
	}
	// Not Link(entryModule(), ...) on 4 KiB kernels: a program that never
	// links does not page in the linker (see entryImageFor). On kernels
	// of larger pages the image is linked for their page size.
	b := entryImageFor(hostArch)
	if b == nil {
		var err error
		if b, err = Link(entryModule(), LinkOptions{}); err != nil {
			return nil, fmt.Errorf("elfimage: entry image for %s with %d-byte pages: %w", hostArch.Name, hostArch.PageSize, err)
		}
	}
	im, err := loadImage(entryPath, b, nil)
	if err != nil {
		return nil, fmt.Errorf("elfimage: entry image: %w", err)
	}
	if err := native.SetEntry(im.Entry()); err != nil {
		im.Close()
		err = fmt.Errorf("elfimage: entry image: %w", err)
		if errors.Is(err, native.ErrEntrySet) {
			entryErr = err
		}
		return nil, err
	}
	entryImg.Store(im)
	return im, nil
}

// ErrEntryImage is returned by [Image.Close] for the entry image
// ([EntryImage]), which stays loaded for the life of the process.
var ErrEntryImage = errors.New("elfimage: the entry image cannot be closed")

// isEntry reports whether im is the entry image.
func (im *Image) isEntry() bool { return im == entryImg.Load() }

// installEntry makes sure the entry image is loaded and installed before
// an image is loaded; outside amd64 there is nothing to install, and a
// routine the program installed itself stays in charge.
func installEntry() error {
	_, err := EntryImage()
	if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, native.ErrEntrySet) {
		return nil
	}
	return err
}
