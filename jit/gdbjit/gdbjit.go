//go:build linux && (amd64 || arm64)

package gdbjit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// descriptor is struct jit_descriptor (GDB manual, "JIT Declarations"):
// 24 bytes on LP64. The one instance is __jit_debug_descriptor, defined in
// symbols_amd64.s and symbols_arm64.s.
type descriptor struct {
	Version       uint32
	ActionFlag    uint32
	RelevantEntry uint64 // address of a codeEntry, or 0
	FirstEntry    uint64 // address of the list head, or 0
}

// codeEntry is struct jit_code_entry: 32 bytes on LP64, at the start of
// each Entry's mapping.
type codeEntry struct {
	NextEntry   uint64
	PrevEntry   uint64
	SymfileAddr uint64
	SymfileSize uint64
}

// Implemented in symbols_amd64.s and symbols_arm64.s.
func registerCode()
func descriptorAddr() *descriptor

// Both runtime functions are exported on purpose to other packages (see
// their comments in runtime/proc.go and go.dev/issue/67401).
//
//go:linkname entersyscall runtime.entersyscall
func entersyscall()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// callRegisterCode calls __jit_debug_register_code while the runtime
// considers the goroutine in a system call, as syscall.Syscall does.
//
// Why: gdb handles the notification at its breakpoint on
// __jit_debug_register_code and then steps the thread over that
// breakpoint. If a signal reaches the thread during that step, the thread
// returns from the handler to the breakpoint address, gdb reports the
// breakpoint again and registers the same entry a second time (seen with
// gdb 13: two to four copies of one symbol file, one of which survives
// unregistration). Reading a symbol file takes gdb well over the 10 ms
// after which Go's sysmon preempts a running goroutine with SIGURG, so the
// signal is likely. A goroutine in a system call is never sent
// preemption signals (sysmon and the garbage collector take its P
// instead). Other signals (SIGPROF while CPU profiling) can still cause a
// duplicate.
//
// It must be nosplit: the goroutine stack must not grow between
// entersyscall and exitsyscall.
//
//go:nosplit
func callRegisterCode() {
	entersyscall()
	registerCode()
	exitsyscall()
}

var (
	// mu serialises every change of the list and of the descriptor, and
	// every notification: gdb reads the descriptor when the notification
	// stops the process, so the fields must describe that notification.
	mu sync.Mutex
	// desc is __jit_debug_descriptor, in the binary's data segment.
	desc = descriptorAddr()
	// head mirrors desc.FirstEntry on the Go side (the list is also
	// linked through Entry.next/prev, so no address is ever turned back
	// into a pointer).
	head *Entry
	// count is the number of registered entries.
	count int
)

// symfileOffset is where the symbol file copy starts in an Entry's
// mapping: after the 32-byte jit_code_entry, rounded to 64 bytes.
const symfileOffset = 64

// Entry is one registered symbol file: a jit_code_entry and a copy of the
// ELF file, both in one private anonymous mapping outside the Go heap
// (gdb reads them from the process's memory, and reads the symbol file
// lazily for as long as the entry is registered). Its methods may be called
// from any goroutine.
type Entry struct {
	mem        []byte // the mapping: codeEntry at 0, symfile at symfileOffset
	size       int    // symbol file size in bytes
	next, prev *Entry // list links, guarded by mu
	registered bool   // guarded by mu
}

func (e *Entry) hdr() *codeEntry { return (*codeEntry)(unsafe.Pointer(&e.mem[0])) }

func (e *Entry) addr() uint64 { return uint64(uintptr(unsafe.Pointer(&e.mem[0]))) }

// Addr returns the address of the entry's jit_code_entry: the value gdb
// sees in the list and in relevant_entry. It stays the same until
// Unregister returns; afterwards the address may be reused. Cost: none.
func (e *Entry) Addr() uintptr { return uintptr(e.addr()) }

// SymfileAddr returns the address of the entry's copy of the symbol file,
// the first byte of [SymfileAddr, SymfileAddr+SymfileSize). Cost: none.
func (e *Entry) SymfileAddr() uintptr { return e.Addr() + symfileOffset }

// SymfileSize returns the size in bytes of the symbol file. Cost: none.
func (e *Entry) SymfileSize() int { return e.size }

// Small entries (header and symbol file within one page) reuse pages of
// unregistered entries instead of a new mmap(2) and munmap(2) each: a
// fresh page costs a page fault on first write and munmap a TLB shootdown
// across the process's threads, together about 50 µs here, ten times the
// rest of a registration. At most maxCachedPages pages are kept.
const maxCachedPages = 64

var (
	pageMu    sync.Mutex
	pageCache [][]byte // free single-page mappings, each of length pageSize
	pageSize  = unix.Getpagesize()
)

// mapEntry returns at least n bytes of private anonymous memory, a cached
// page when n fits in one.
func mapEntry(n int) ([]byte, error) {
	if n <= pageSize {
		pageMu.Lock()
		if k := len(pageCache); k > 0 {
			mem := pageCache[k-1]
			pageCache = pageCache[:k-1]
			pageMu.Unlock()
			return mem, nil
		}
		pageMu.Unlock()
		n = pageSize
	}
	// A large symbol file is about to be written whole: populate its
	// pages in the mmap call instead of taking a page fault on each.
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("gdbjit: mmap %d bytes: %w", n, err)
	}
	return mem, nil
}

// unmapEntry caches or unmaps memory from mapEntry.
func unmapEntry(mem []byte) error {
	if len(mem) == pageSize {
		pageMu.Lock()
		if len(pageCache) < maxCachedPages {
			pageCache = append(pageCache, mem)
			pageMu.Unlock()
			return nil
		}
		pageMu.Unlock()
	}
	if err := unix.Munmap(mem); err != nil {
		return fmt.Errorf("gdbjit: munmap: %w", err)
	}
	return nil
}

// newEntry maps memory for an entry and copies symfile into it. The
// entry is not linked.
func newEntry(symfile []byte) (*Entry, error) {
	if err := checkSymfile(symfile); err != nil {
		return nil, err
	}
	return newEntryFunc(len(symfile), func(dst []byte) error { copy(dst, symfile); return nil })
}

// newEntryFunc maps memory for an entry with a size-byte symbol file
// written by fill. The entry is not linked.
func newEntryFunc(size int, fill func(dst []byte) error) (*Entry, error) {
	if size < 0 || size > int(^uint(0)>>1)-symfileOffset {
		return nil, fmt.Errorf("gdbjit: symbol file size %d out of range", size)
	}
	mem, err := mapEntry(symfileOffset + size)
	if err != nil {
		return nil, err
	}
	if err := fill(mem[symfileOffset : symfileOffset+size]); err != nil {
		unmapEntry(mem)
		return nil, err
	}
	if err := checkSymfile(mem[symfileOffset : symfileOffset+size]); err != nil {
		unmapEntry(mem)
		return nil, err
	}
	e := &Entry{mem: mem, size: size}
	h := e.hdr()
	h.SymfileAddr = e.addr() + symfileOffset
	h.SymfileSize = uint64(size)
	return e, nil
}

// free releases the entry's memory; e must be unlinked.
func (e *Entry) free() error {
	mem := e.mem
	e.mem = nil
	return unmapEntry(mem)
}

// link puts e at the head of the list; mu must be held. Every store that
// a debugger following first_entry and next_entry could observe is
// atomic and ordered so that the list is well formed after each one: the
// new entry is complete before anything points at it.
func link(e *Entry) {
	h := e.hdr()
	old := head
	var oldAddr uint64
	if old != nil {
		oldAddr = old.addr()
	}
	atomic.StoreUint64(&h.PrevEntry, 0)
	atomic.StoreUint64(&h.NextEntry, oldAddr)
	if old != nil {
		atomic.StoreUint64(&old.hdr().PrevEntry, e.addr())
		old.prev = e
	}
	atomic.StoreUint64(&desc.FirstEntry, e.addr())
	e.next, e.prev = old, nil
	head = e
	e.registered = true
	count++
}

// unlink removes e from the list; mu must be held. The first store makes
// e unreachable from first_entry; e's own links are left intact until it
// is freed, so a debugger standing on e still reaches the rest.
func unlink(e *Entry) {
	h := e.hdr()
	next := atomic.LoadUint64(&h.NextEntry)
	if e.prev != nil {
		atomic.StoreUint64(&e.prev.hdr().NextEntry, next)
		e.prev.next = e.next
	} else {
		atomic.StoreUint64(&desc.FirstEntry, next)
		head = e.next
	}
	if e.next != nil {
		atomic.StoreUint64(&e.next.hdr().PrevEntry, atomic.LoadUint64(&h.PrevEntry))
		e.next.prev = e.prev
	}
	e.next, e.prev = nil, nil
	e.registered = false
	count--
}

// notify tells a debugger about e: it sets action_flag and relevant_entry,
// calls __jit_debug_register_code (where gdb's JIT breakpoint stops the
// process and reads the descriptor) and resets both fields. mu must be
// held.
func notify(action uint32, e *Entry) {
	atomic.StoreUint64(&desc.RelevantEntry, e.addr())
	atomic.StoreUint32(&desc.ActionFlag, action)
	callRegisterCode()
	atomic.StoreUint32(&desc.ActionFlag, actionNone)
	atomic.StoreUint64(&desc.RelevantEntry, 0)
}

// Register copies symfile (an ELF file whose every address is the
// run-time address of what it describes: gdb does not relocate JIT symbol
// files) into a new mapping outside the Go heap, links a jit_code_entry
// for it at the head of the list, and notifies a debugger once
// (action_flag JIT_REGISTER_FN, relevant_entry the new entry, then a call
// of __jit_debug_register_code).
//
// Cost without a debugger: the copy, a call of an empty function, and
// for a symbol file over 4 KiB-64 bytes (or when no page of an
// unregistered entry is cached) one mmap(2) of len(symfile)+64 bytes
// rounded to pages. With gdb attached,
// each notification stops the process while gdb reads the symbol file and
// re-sets every breakpoint, and gdb's cost grows with the number of
// registered symbol files: put many procedures in one symbol file
// ([Symfile], [RegisterProcs]) rather than registering one per procedure.
//
// Errors: [ErrNotELF] (symfile is not an ELF file), or the mmap error
// wrapped; nothing is registered then.
func Register(symfile []byte) (*Entry, error) {
	e, err := newEntry(symfile)
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	link(e)
	notify(actionRegister, e)
	return e, nil
}

// RegisterFunc is [Register] for a symbol file of size bytes that fill
// writes straight into the entry's memory (outside the Go heap), sparing
// the copy of a symbol file built elsewhere first: elfimage writes an
// image's rebased file this way. fill must write all of dst; its error
// is returned and nothing is registered. Errors and cost otherwise as
// for Register.
func RegisterFunc(size int, fill func(dst []byte) error) (*Entry, error) {
	e, err := newEntryFunc(size, fill)
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	link(e)
	notify(actionRegister, e)
	return e, nil
}

// RegisterBatch registers several symbol files under one acquisition of
// the package's lock: it maps and copies all of them first (if one fails,
// none is registered and the error is returned), then links each at the
// head of the list and notifies once per symbol file, in order; the
// returned entries are in the order of symfiles.
//
// What "batch" can and cannot mean: gdb's handler for JIT_REGISTER_FN
// reads only relevant_entry, and it walks the whole list from first_entry
// only when it first attaches, so every symbol file needs its own
// notification; no API can register N symbol files with fewer than N
// debugger stops. RegisterBatch saves only the per-call locking and keeps
// the batch contiguous in the list. The batching that cuts debugger cost
// is many procedures per symbol file: build one symbol file for the whole
// batch ([Symfile]) and register it once ([RegisterProcs]), one
// notification for any number of procedures.
//
// Cost: that of Register per symbol file.
func RegisterBatch(symfiles [][]byte) ([]*Entry, error) {
	es := make([]*Entry, 0, len(symfiles))
	for i, s := range symfiles {
		e, err := newEntry(s)
		if err != nil {
			for _, e := range es {
				e.free()
			}
			return nil, fmt.Errorf("gdbjit: symbol file %d of batch: %w", i, err)
		}
		es = append(es, e)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range es {
		link(e)
		notify(actionRegister, e)
	}
	return es, nil
}

// Unregister removes the entry from the list, notifies a debugger
// (action_flag JIT_UNREGISTER_FN, relevant_entry the entry's address, then
// a call of __jit_debug_register_code: gdb drops the symbol file it read
// from that entry), and only then unmaps the entry and its symbol file
// copy, which gdb may read until that notification. This is the order of
// the GDB manual ("Unregistering Code"). The code the symbol file
// describes may be freed after Unregister returns, not before.
//
// Errors: [ErrUnregistered] if the entry was already unregistered, or the
// munmap error wrapped (the entry is unregistered anyway). Cost: the
// notification, and one munmap(2) unless the entry's page is cached for
// reuse (single-page entries, up to 64 pages cached).
func (e *Entry) Unregister() error {
	mu.Lock()
	defer mu.Unlock()
	if !e.registered {
		return ErrUnregistered
	}
	unlink(e)
	notify(actionUnregister, e)
	return e.free()
}

// Len returns the number of registered entries. Cost: one lock.
func Len() int {
	mu.Lock()
	defer mu.Unlock()
	return count
}

// DescriptorAddr returns the address of __jit_debug_descriptor in this
// process, the address gdb finds through .symtab. Cost: none.
func DescriptorAddr() uintptr { return uintptr(unsafe.Pointer(desc)) }

// RegisterProcs builds one symbol file for procs with [Symfile] and
// registers it with [Register]: one debugger notification for any number
// of procedures. Errors are those of Symfile and Register.
func RegisterProcs(procs []Proc) (*Entry, error) {
	b, err := Symfile(procs)
	if err != nil {
		return nil, err
	}
	return Register(b)
}
