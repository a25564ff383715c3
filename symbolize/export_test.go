package symbolize

// ScanAlways makes every lookup take the scan path (scanFrames) until the
// returned function restores the default: scan the first address of a
// unit only.
func ScanAlways() (restore func()) {
	scanAlways.Store(true)
	return func() { scanAlways.Store(false) }
}

// LaidOut returns the sh_addr layoutObject gave each section of a
// relocatable object (all 0 when it fell back), in section order.
func LaidOut(s *Symbolizer) []uint64 {
	var out []uint64
	for _, h := range s.f.obj.Sections {
		out = append(out, h.Addr)
	}
	return out
}

// SlabSupported is slabSupported.
const SlabSupported = slabSupported

// SlabChunks returns the number of chunks s's slab holds, -1 when s has
// none.
func SlabChunks(s *Symbolizer) int {
	if s.slab == nil {
		return -1
	}
	s.slab.mu.Lock()
	defer s.slab.mu.Unlock()
	return len(s.slab.chunks)
}

// SetSlabMinFile sets slabMinFile to n and returns the function that
// restores it.
func SetSlabMinFile(n int) func() {
	old := slabMinFile
	slabMinFile = n
	return func() { slabMinFile = old }
}

// SlabBytes returns the bytes s's slab has handed out (its chunks' sizes
// less the unused rest of the newest), 0 when s has none.
func SlabBytes(s *Symbolizer) int {
	if s.slab == nil {
		return 0
	}
	return s.slab.inUse()
}

// CommonDone reports whether s's symbol table is sorted and whether its
// .debug_str has been copied (PrepareCommon's work).
func CommonDone(s *Symbolizer) (sorted, strCopied bool) {
	return s.syms != nil && s.syms.sorted.Load(), s.d != nil && s.d.strCopy.Load() != nil
}
