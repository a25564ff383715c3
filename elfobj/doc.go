// Package elfobj reads and writes ELF files (System V gABI, "Object
// Files"; the x86-64 and AArch64 psABIs for their processor-specific
// values): the one place in elfimage that encodes or decodes ELF headers,
// program headers, section headers, symbol tables, relocations, dynamic
// entries and notes. It uses debug/elf's types and constants and adds
// only what debug/elf lacks (NT_GNU_BUILD_ID, say), in the spec's
// spelling. It knows nothing of images or runtimes: the linker (package
// elfimage), the GDB JIT symbol files (package jit/gdbjit), the loader,
// the symbolizer and the process viewer are built on it.
//
// # Reading
//
// [File] reads an ELF file of either class (ELFCLASS32, ELFCLASS64) and
// either byte order from an [io.ReaderAt] ([NewFile], [Open]) or from
// bytes already in memory ([NewBytes]: a mapped image, whose section
// contents are then returned as subslices, without a copy). It decodes
// the file header, the program header table and the section header table
// (System V gABI, chapter 4 "Object Files": "ELF Header", "Sections",
// chapter 5 "Program Header"), resolving the extended numbering escapes:
// e_shnum 0 takes the count from section header 0's sh_size, e_shstrndx
// SHN_XINDEX from its sh_link, e_phnum PN_XNUM from its sh_info. On top of
// the tables it reads notes ([NoteReader], [File.BuildID]), symbol tables
// ([SymbolTable]: .symtab and .dynsym with SHT_SYMTAB_SHNDX), compressed
// sections ([File.SectionData]: SHF_COMPRESSED with ELFCOMPRESS_ZLIB or
// ELFCOMPRESS_ZSTD, and GNU .zdebug_ sections), and relocations of
// relocatable objects ([File.Relocated]: what a reader of an ET_REL
// file's DWARF and .eh_frame must apply first).
//
// Callers that must decode headers from a small buffer without allocating
// (the image loader) use [DecodeHeader] and the Decode methods of
// [Header] directly; they know nothing of the tables' placement rules and
// never allocate.
//
// Every decoder treats its input as hostile: a malformed file gives a
// *formaterr.Error whose Source names the structure ("ELF header",
// "program header 2", "section header 5", ".symtab", ".rela.debug_info"),
// whose Offset is the file offset of the offending field (for structures
// read from a byte slice that is not a whole file, the offset given by
// the caller plus the field's place in the slice) and whose Field is the
// field's gABI name ("e_phoff", "sh_size", "r_info"). Every table and
// every section is checked against the file size before anything is
// allocated for it, and every loop is bounded by the input's size.
//
// # Writing
//
// [Writer] writes one file in two phases, as the Rust object crate's ELF
// writer does. In the reserve phase the caller declares every section
// ([Writer.AddSection], which gives its index), every symbol index
// ([Writer.ReserveLocalSymbols], [Writer.ReserveGlobalSymbols]) and
// every string ([StringTable.Add]), and reserves every range of the file
// in file order with its alignment: the ELF header, the program header
// table, each section's contents, the section header table. Everything
// that contents may refer to (an index, an offset, an address derived
// from an offset) is then known. In the write phase the caller writes
// each range once, in the same order; the writer checks that what is
// written is what was reserved (order, sizes, counts, the bindings of
// symbols against their reserved indices) and reports the first
// difference as an error wrapping [ErrLayout]. Counts are never kept by
// hand: e_phnum, e_shnum, e_shstrndx, sh_size of tables, sh_info of the
// symbol table (one past the last local symbol) and sh_link of the symbol
// table come from the reservations.
//
// A linker writing an image whose file offsets are its addresses reserves
// the loaded sections, sets each section's Addr to its Offset, builds
// what depends on addresses (symbols, debug information), reserves that,
// and writes:
//
//	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
//	note := w.AddSection(elf.SectionHeader{Name: ".note.gnu.build-id", Type: elf.SHT_NOTE, Flags: elf.SHF_ALLOC, Addralign: 4})
//	text := w.AddSection(elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addralign: 16})
//	w.ReserveFileHeader()
//	w.ReserveProgramHeaders(2)
//	w.ReserveSectionData(note, elfobj.BuildIDNoteSize)
//	w.ReserveAlign(4096)
//	w.ReserveSectionData(text, uint64(len(code)))
//	note.Addr, text.Addr = note.Offset, text.Offset
//	shstrtab := w.ReserveShstrtab()
//	w.ReserveSectionHeaders()
//
//	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_DYN, Machine: elf.EM_X86_64})
//	w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_LOAD, ...})
//	w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_NOTE, ...})
//	w.WriteBuildID(note)
//	copy(w.SectionBytes(text), code)
//	w.WriteStringTable(shstrtab)
//	w.WriteSectionHeaders()
//	file, err := w.Finish()
//
// The writer writes ELF64 and ELF32 in both byte orders, executables,
// shared objects (ET_DYN) and relocatable objects (ET_REL: SHT_RELA
// sections with SHF_INFO_LINK, STT_SECTION symbols, .note.GNU-stack; see
// the package's tests, whose object gcc links), with gABI extended section
// numbering. A build ID ([Writer.WriteBuildID]) is the SHA-1 of the whole
// file with the ID zeroed, filled in by [Writer.Finish]; [Writer.HashWritten]
// hashes the part already written on another goroutine while the rest is
// written (the same ID). The output is
// allocated once, at its final size, and string tables can be built
// without hashing ([StringTable.AddUnique]) when the caller knows its
// strings distinct.
package elfobj
