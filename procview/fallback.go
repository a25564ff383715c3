package procview

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/jit/perfmap"
	"github.com/elfimage/elfimage/native"
	"github.com/elfimage/elfimage/unwind"
)

// MaxPerfMapSize bounds the perf map file LoadPerfMap reads, in bytes.
const MaxPerfMapSize = 64 << 20

// ErrNotExecutable is wrapped by the stop error of a walk whose next pc,
// as the call frame information of the frame before gives it, is not in
// executable memory (a corrupt stack, or the end of a stack whose
// outermost frame is not marked).
var ErrNotExecutable = errors.New("procview: pc outside executable memory")

// extras is what the View keeps for walking and describing frames beyond
// its modules: the perf map, the trampoline of package native, and the
// argument indexes of modules.
type extras struct {
	perf     *perfmap.Map
	perfPath string

	trampOnce sync.Once
	tramp     [2]uint64 // [start, end) of native's trampoline; 0, 0 if not found

	argsMu sync.Mutex
	args   map[*object]*argIndex
}

// addressSpace is the unwind.Space of a View: its mappings (sorted by
// Start, as /proc/PID/maps lists them), or, when it has none, its modules.
type addressSpace struct{ v *View }

func (s addressSpace) find(addr uint64) *Mapping {
	ms := s.v.maps
	i := sort.Search(len(ms), func(i int) bool { return ms[i].End > addr })
	if i < len(ms) && ms[i].Start <= addr {
		return &ms[i]
	}
	return nil
}

// Executable implements unwind.Space.
func (s addressSpace) Executable(addr uint64) bool {
	if len(s.v.maps) == 0 {
		_, err := s.v.Lookup(addr)
		return err == nil
	}
	m := s.find(addr)
	return m != nil && m.Exec()
}

// Mapping implements unwind.Space.
func (s addressSpace) Mapping(addr uint64) (lo, hi uint64, ok bool) {
	m := s.find(addr)
	if m == nil {
		return 0, 0, false
	}
	return m.Start, m.End, true
}

// LoadPerfMap reads the perf map at path (normally /tmp/perf-PID.map, see
// package jit/perfmap) so that frames in code outside every module are
// named from it, and its entries give the frame-pointer fallback the start
// of their functions. As perf trusts such a file only when it is owned by
// root or by the user running perf, LoadPerfMap trusts it only when it is
// a regular file (not followed through a symbolic link) owned by root or
// by one of uids (the process's effective user, which wrote it; for a
// core, also the user who names the file). Call it before the View is
// used by several goroutines. Errors: those of opening it
// (errors.Is(err, fs.ErrNotExist) when there is none), an untrusted or
// oversized file, and those of perfmap.Parse. Cost: O(n log n) for n
// lines, at most MaxPerfMapSize bytes read.
func (v *View) LoadPerfMap(path string, uids ...int) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.Mode().IsRegular():
		return fmt.Errorf("procview: %s is not a regular file", path)
	case !ok || (sys.Uid != 0 && !slices.Contains(uids, int(sys.Uid))):
		return fmt.Errorf("procview: %s is not owned by root or by the process's user %v: not trusted", path, uidList(uids))
	case st.Size() > MaxPerfMapSize:
		return fmt.Errorf("procview: %s: %d bytes is more than %d", path, st.Size(), MaxPerfMapSize)
	}
	m, err := perfmap.Parse(io.LimitReader(f, MaxPerfMapSize))
	if err != nil {
		return fmt.Errorf("procview: %s: %w", path, err)
	}
	v.ext.perf, v.ext.perfPath = m, path
	return nil
}

// uidList spells user ids for an error: "1000", "1000 or 0", "(unknown)".
func uidList(uids []int) string {
	var parts []string
	for _, u := range uids {
		if u >= 0 {
			parts = append(parts, strconv.Itoa(u))
		}
	}
	if len(parts) == 0 {
		return "(unknown)"
	}
	return strings.Join(parts, " or ")
}

// perfEntry returns the perf map entry covering pc.
func (v *View) perfEntry(pc uint64) (perfmap.Entry, bool) {
	if v.ext.perf == nil {
		return perfmap.Entry{}, false
	}
	return v.ext.perf.Lookup(pc)
}

// funcStart returns the start of the function holding pc when a perf map
// entry or a module's symbol table says, else 0.
func (v *View) funcStart(pc uint64) uint64 {
	if e, ok := v.perfEntry(pc); ok {
		return e.Start
	}
	m, err := v.Lookup(pc)
	if err != nil {
		return 0
	}
	o := m.obj.get()
	if o.err != nil {
		return 0
	}
	if s, ok := symbolAt(o.symbols(), pc-m.Bias); ok {
		return s.value + m.Bias
	}
	return 0
}

// symbolAt is lookupSymbol returning the symbol.
func symbolAt(syms []symEntry, addr uint64) (symEntry, bool) {
	i := sort.Search(len(syms), func(i int) bool { return syms[i].value > addr }) - 1
	if i < 0 {
		return symEntry{}, false
	}
	s := syms[i]
	if s.size != 0 && addr-s.value >= s.size {
		return symEntry{}, false
	}
	return s, true
}

// Package native's call trampoline (native/call_amd64.s) switches from the
// Go stack to a native stack: it saves its own stack and frame pointers
// (its frame record on the Go stack) at Top-native.SavedSPOffset and
// Top-native.SavedBPOffset of the native stack (Top is page aligned) and
// calls the entry routine from there, so the return address into the
// trampoline is at Top-native.EntryRoutineSPOffset, or, without an entry
// routine, calls the code itself and the return address is at
// Top-native.EntrySPOffset. Its own (Go-generated) call frame
// information cannot describe the switch (the library's entry routine
// does, when its image is published); these are the symbol names it has
// in a Go binary's symbol table.
var trampolineSymbols = []string{
	"github.com/elfimage/elfimage/native.trampoline.abi0",
	"github.com/elfimage/elfimage/native.trampoline",
}

// trampoline returns the trampoline's run-time range, found on first use
// in the symbol tables of the file modules.
func (v *View) trampoline() (start, end uint64) {
	v.ext.trampOnce.Do(func() {
		seen := map[*object]bool{}
		for i := range v.mods {
			m := &v.mods[i]
			if m.Kind != ModuleFile || seen[m.obj] {
				continue
			}
			seen[m.obj] = true
			o := m.obj.get()
			if o.err != nil {
				continue
			}
			for _, s := range o.symbols() {
				for _, n := range trampolineSymbols {
					if s.name == n && s.size > 0 {
						v.ext.tramp = [2]uint64{s.value + m.Bias, s.value + s.size + m.Bias}
						return
					}
				}
			}
		}
	})
	return v.ext.tramp[0], v.ext.tramp[1]
}

// isTrampolineReturn reports whether pc is a return address into the
// trampoline (inside it, past its first byte).
func (v *View) isTrampolineReturn(pc uint64) bool {
	if v.Arch() != arch.X86_64 {
		return false // the layout below is native/call_amd64.s's
	}
	s, e := v.trampoline()
	return pc > s && pc <= e && s != e
}

// trampolineEntry looks, in the few words at and above sp, for the return
// address into the trampoline that a frame without a frame record near the
// top of a native stack (the entry routine before its push, or the code it
// called) has just above it, and returns its address.
func (v *View) trampolineEntry(mem unwind.Memory, sp uint64) (uint64, bool) {
	for k := uint64(0); k < 4; k++ {
		w, err := mem.ReadUint64(sp + 8*k)
		if err == nil && v.isTrampolineReturn(w) {
			return sp + 8*k, true
		}
	}
	return 0, false
}

// stepTrampoline computes the Go caller of native.Call's trampoline from
// the values it saved at the top of the native stack, whose return address
// into the trampoline is at raAddr (see trampolineSymbols): its SP and BP,
// and through its frame record at BP on the Go stack the caller's BP and
// return address; rsp = BP+16, the trampoline's CFA, which becomes cur's.
func (v *View) stepTrampoline(u *unwind.Unwinder, cur, caller *unwind.Frame, raAddr uint64) error {
	const page = 4096 // native stacks are mmap'd: their top is page aligned
	top := raAddr + native.EntryRoutineSPOffset
	if top%page != 0 {
		top = raAddr + native.EntrySPOffset // called without an entry routine
	}
	if top%page != 0 {
		return fmt.Errorf("%w: the return address into native.Call's trampoline at %#x is not at the top of a native stack", unwind.ErrImplausible, raAddr)
	}
	goSP, err := u.Mem.ReadUint64(top - native.SavedSPOffset)
	if err != nil {
		return fmt.Errorf("reading the Go stack pointer native.Call saved at %#x: %w", top-native.SavedSPOffset, err)
	}
	goBP, err := u.Mem.ReadUint64(top - native.SavedBPOffset)
	if err != nil {
		return fmt.Errorf("reading the Go frame pointer native.Call saved at %#x: %w", top-native.SavedBPOffset, err)
	}
	if goSP%8 != 0 || goSP == 0 || goBP < goSP || goBP-goSP > 1<<10 || goBP%8 != 0 {
		return fmt.Errorf("%w: the Go stack and frame pointers %#x, %#x native.Call saved at %#x are not its frame's", unwind.ErrImplausible, goSP, goBP, top-native.SavedBPOffset)
	}
	ra, err := u.Mem.ReadUint64(goBP + 8)
	if err != nil {
		return fmt.Errorf("reading the return address in the trampoline's frame record at %#x: %w", goBP, err)
	}
	callerBP, err := u.Mem.ReadUint64(goBP)
	if err != nil {
		return fmt.Errorf("reading the trampoline's frame record at %#x: %w", goBP, err)
	}
	if err := u.PlausibleReturn(ra, addressSpace{v}); err != nil {
		return fmt.Errorf("native.Call's saved Go frame pointer %#x: %w", goBP, err)
	}
	cur.CFA = goBP + 16
	*caller = unwind.Frame{PC: ra, SP: goBP + 16, Method: unwind.MethodStackSwitch}
	caller.Regs.Set(arch.X86_64_RSP, goBP+16)
	caller.Regs.Set(arch.X86_64_RBP, callerBP)
	caller.Regs.Set(arch.X86_64_RA, ra)
	return nil
}

// step unwinds cur: native.Call's trampoline by its known layout; then
// by CFI; for a pc without CFI by frame pointer (unwind.StepFP, with the
// View's address space and the function start its perf map or symbol
// table gives), and, for a frame at the top of a native stack that has
// no frame record, by the trampoline's saved state.
func (v *View) step(u *unwind.Unwinder, cur, caller *unwind.Frame, lookup uint64) error {
	if !cur.First && !cur.AfterSignal && v.isTrampolineReturn(cur.PC) {
		if err := v.stepTrampoline(u, cur, caller, cur.SP-8); err != nil {
			return fmt.Errorf("crossing native.Call's stack switch: %w", err)
		}
		return nil
	}
	err := u.Step(cur, caller)
	if errors.Is(err, unwind.ErrOutermost) && u.Arch == arch.AArch64 {
		if ok := v.stepGoSigtramp(u, cur, caller); ok {
			return nil
		}
	}
	if err == nil || !errors.Is(err, unwind.ErrNoFDE) {
		return err
	}
	ferr := u.StepFP(cur, caller, &unwind.FPHints{Space: addressSpace{v}, FuncStart: v.funcStart(lookup)})
	if ferr == nil || errors.Is(ferr, unwind.ErrOutermost) {
		return ferr
	}
	if e, ok := v.trampolineEntry(u.Mem, cur.SP); ok {
		terr := v.stepTrampoline(u, cur, caller, e)
		if terr == nil {
			return nil
		}
		ferr = errors.Join(ferr, fmt.Errorf("crossing native.Call's stack switch: %w", terr))
	}
	mod := ""
	if m, merr := v.Lookup(lookup); merr == nil {
		mod = m.Name
	}
	return &noCFIError{pc: cur.PC, module: mod, cfi: err, fp: ferr}
}

// goSigtramps are the names of Go's signal handlers on linux/arm64, which
// the kernel (or qemu-user) calls with x30 holding the signal return
// trampoline. Go marks them TOPFRAME: their CFI makes the return address
// undefined, the outermost frame, and a walk would stop before the code
// the signal interrupted.
var goSigtramps = []string{"runtime.sigtramp.abi0", "runtime.sigtramp", "runtime.cgoSigtramp.abi0", "runtime.cgoSigtramp"}

// stepGoSigtramp steps from a frame in one of Go's AArch64 signal handlers
// (goSigtramps) whose CFI ended the walk: the return address is x30, or,
// past the prologue (the stack pointer below the CFA), where Go's arm64
// prologue saves it, at the stack pointer; the caller is the signal return
// trampoline (recognised by its code, else no step), with the CFA as its
// stack pointer and an exact pc (AfterSignal). ok is false when the frame is not such a handler.
func (v *View) stepGoSigtramp(u *unwind.Unwinder, cur, caller *unwind.Frame) bool {
	pc := cur.LookupPC()
	m, err := v.Lookup(pc)
	if err != nil || m.Kind != ModuleFile {
		return false
	}
	o := m.obj.get()
	if o.err != nil {
		return false
	}
	s, ok := symbolAt(o.symbols(), pc-m.Bias)
	if !ok || !slices.Contains(goSigtramps, s.name) || cur.CFA == 0 {
		return false
	}
	ra, ok := cur.Regs.Get(arch.AArch64_LR)
	if cur.SP < cur.CFA {
		ra, err = u.Mem.ReadUint64(cur.SP)
		ok = err == nil
	}
	if !ok || !v.isSigreturn(ra) {
		return false
	}
	// The trampoline's pc is where the handler returns, its first
	// instruction, not after a call: exact, as for the caller of a
	// signal frame.
	*caller = unwind.Frame{PC: ra, SP: cur.CFA, Regs: cur.Regs, Method: unwind.MethodCFI, AfterSignal: true}
	caller.Regs.Set(arch.AArch64_SP, cur.CFA)
	caller.Regs.Set(arch.AArch64_LR, ra)
	return true
}

// noCFIError is why a frame without CFI could not be unwound: it wraps
// the finder's error (unwind.ErrNoFDE) and the frame-pointer fallback's.
type noCFIError struct {
	pc      uint64
	module  string
	cfi, fp error
}

func (e *noCFIError) Error() string {
	if e.module == "" {
		return fmt.Sprintf("pc %#x is outside every module, without call frame information; by frame pointer: %v", e.pc, e.fp)
	}
	return fmt.Sprintf("no call frame information for pc %#x in %s; by frame pointer: %v", e.pc, e.module, e.fp)
}

func (e *noCFIError) Unwrap() []error { return []error{e.cfi, e.fp} }
