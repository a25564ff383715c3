package symbolize

import (
	"debug/elf"
	"fmt"
	"runtime/debug"
	"strings"
)

// Section returns the contents of the first section named name, and its
// sh_addr (the link-time address of an SHF_ALLOC section; usually 0 for
// debug sections). Compressed sections (SHF_COMPRESSED with zlib or zstd,
// and GNU .zdebug_ ones when name starts with ".debug_") are returned
// decompressed. The bytes are the caller's own: a copy when the file was
// mapped by Open (so that a file truncated later cannot fault the caller),
// otherwise possibly a subslice of New's data or a fresh buffer.
//
// It is used by unwinders that need a module's .eh_frame, .eh_frame_hdr or
// .debug_frame, and by readers of .symtab and .strtab. In a relocatable
// object (ET_REL) the relocations of the section are applied
// (elfobj.File.Relocated), so that an object's DWARF and .eh_frame read as
// if linked at address 0. A missing section (or one of type SHT_NOBITS) returns nil, 0 and no error; errors are
// *formaterr.Error for a section outside the file or a malformed
// compressed section, ErrFault when the mapped file could not be read, and
// ErrClosed after Close. For a Symbolizer of OpenDebug, a section the file
// lacks (or has only as SHT_NOBITS) is the debug file's. Cost: O(section size) (decompression or copy); not
// cached.
func (s *Symbolizer) Section(name string) (data []byte, addr uint64, err error) {
	if s.closed {
		return nil, 0, ErrClosed
	}
	if s.debug != nil {
		data, addr, err = s.section(name)
		if data == nil && err == nil {
			return s.debug.Section(name)
		}
		return data, addr, err
	}
	return s.section(name)
}

func (s *Symbolizer) section(name string) (data []byte, addr uint64, err error) {
	if s.mapped {
		defer s.guard(&err)
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	}
	f0 := s.f.file0
	i := f0.FindSection(name)
	if i >= 0 {
		addr = f0.Sections[i].Addr
	}
	if i < 0 && !strings.HasPrefix(name, ".debug_") {
		return nil, 0, nil
	}
	p, err := f0.DebugSection(name)
	if err != nil {
		return nil, 0, fmt.Errorf("symbolize: section %s: %w", name, err)
	}
	if s.mapped && p != nil && i >= 0 && f0.Sections[i].Flags&elf.SHF_COMPRESSED == 0 {
		// debugSection returns a subslice of the mapping for an
		// uncompressed section (unless relocations were applied to a
		// copy): copy it while faults are recoverable.
		p = append([]byte(nil), p...)
	}
	return p, addr, nil
}
