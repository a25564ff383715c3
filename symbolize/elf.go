package symbolize

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"

	"github.com/elfimage/elfimage/elfobj"
)

// elfFile is the ELF file as package elfobj reads it; class64 is kept
// apart so that a symtab can be built without a file (tests).
type elfFile struct {
	obj     *elfobj.File
	class64 bool
}

// parseELF reads the ELF header and the section header table of data
// (used in place) or, when data is nil, of the size bytes r holds. Input
// that is not ELF, or not little-endian ELF, wraps ErrNotELF; a malformed
// table is elfobj's *formaterr.Error.
func parseELF(data []byte, r io.ReaderAt, size int64) (*elfFile, error) {
	var h elfobj.Header
	var err error
	if data != nil || r == nil {
		h, err = elfobj.DecodeHeader(data)
	} else {
		h, err = elfobj.ReadHeader(r)
	}
	if errors.Is(err, elfobj.ErrNotELF) {
		return nil, fmt.Errorf("%w: %w", ErrNotELF, err)
	} else if err != nil {
		return nil, err
	}
	if h.Data != elf.ELFDATA2LSB {
		return nil, fmt.Errorf("%w: only little-endian ELF is supported (EI_DATA %v)", ErrNotELF, h.Data)
	}
	var f *elfobj.File
	if data != nil || r == nil {
		f, err = elfobj.NewBytes(data)
	} else {
		f, err = elfobj.NewFile(r, size)
	}
	if err != nil {
		return nil, err
	}
	return &elfFile{obj: f, class64: f.Class == elf.ELFCLASS64}, nil
}

// debugSection returns the contents of DWARF section name (".debug_info"),
// decompressed (SHF_COMPRESSED with zlib or zstd, GNU .zdebug_) and, in a
// relocatable object, relocated. A missing section is nil, nil.
func (f *elfFile) debugSection(name string) ([]byte, error) { return f.obj.DebugSection(name) }
