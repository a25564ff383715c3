package native

// SyncInstructionCache makes the instruction cache coherent with the data
// written to the size bytes at [addr, addr+size), so that code written
// there through data stores runs as written: call it after writing (or
// relocating) machine code and before running it, whatever the mapping's
// protection (ARM ARM B2.4.4: AArch64 instruction fetches do not see
// stores until the data cache lines are cleaned to the point of
// unification and the instruction cache lines invalidated; the sequence is
// DC CVAU per line, DSB ISH, IC IVAU per line, DSB ISH, ISB, with the line
// sizes of CTR_EL0). The memory must be mapped and readable. On x86-64,
// whose instruction fetches are coherent with stores (Intel SDM vol. 3,
// §11.6), and everywhere else it does nothing; qemu-user does not need it
// either, real AArch64 hardware does. Cost: one cache maintenance
// instruction per 64-byte line (typical) on arm64, nothing elsewhere.
// A non-positive size does nothing.
func SyncInstructionCache(addr uintptr, size int) {
	if size <= 0 || addr+uintptr(size) < addr {
		return
	}
	syncICache(addr, addr+uintptr(size))
}
