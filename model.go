package elfimage

import (
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// Module is what a compiler hands the linker: the code and data of one
// source file (one DWARF compile unit) with everything a debugger or
// profiler needs to know about it. All offsets are in bytes from the start
// of the owning Proc's Code or Datum's Bytes; the linker assigns addresses.
type Module struct {
	// Arch is the target ABI; nil means arch.X86_64.
	Arch *arch.Arch
	// File is the source file name as it should appear in debug info
	// (DW_AT_name of the compile unit, line-table file entries 0 and 1).
	// A relative name is relative to CompDir.
	File string
	// CompDir is the compilation directory (DW_AT_comp_dir, line-table
	// directory entry 0).
	CompDir string
	// Producer names the compiler (DW_AT_producer).
	Producer string
	// Language is the DW_AT_language value; 0 omits the attribute.
	Language dwarf.Lang
	// Entry names the Proc whose address becomes e_entry; empty means none
	// (e_entry 0).
	Entry string
	// Procs are the procedures in the order they are laid out in .text.
	Procs []*Proc
	// ROData are read-only constants, laid out in the first (R) segment.
	// They may carry PC-relative relocations only (resolved at link time).
	ROData []*Datum
	// Data are constants that need load-time relocation (tables of
	// addresses); they go in the R+W segment and every Abs64 relocation in
	// them becomes a dynamic relocation the loader applies.
	Data []*Datum
	// Externs name procedures defined outside the module, by their
	// symbols (C functions, for example): a relocation may refer to them
	// only in an object ([LinkObject]), where each becomes an undefined
	// STB_GLOBAL STT_NOTYPE symbol the system linker resolves; [Link]
	// refuses a module with Externs, as an image has no dynamic symbol
	// lookup.
	Externs []string
}

// Proc is one procedure: machine code with its source positions, call
// frame information, parameters and link-time relocations.
type Proc struct {
	// Name is the symbol and DW_AT_name.
	Name string
	// LinkName, when not "", is the procedure's symbol instead of Name,
	// and its DW_AT_linkage_name: the name other languages' code calls it
	// by (a C identifier for a source name that is not one). Name stays
	// what relocations of the module refer to and what debuggers show.
	LinkName string
	// Code is the machine code.
	Code []byte
	// Align is the byte alignment of the first instruction (a power of
	// two); 0 means 16.
	Align int
	// Line and Column give where the procedure is declared in File
	// (DW_AT_decl_line, DW_AT_decl_column); 0 when unknown.
	Line, Column int
	// Doc is the procedure's docstring, if any.
	Doc string
	// Internal marks runtime support code the source did not define; it
	// gets a local symbol and DW_AT_artificial.
	Internal bool
	// Lines maps code offsets to source positions. Rows are sorted by
	// Offset; a row holds from its Offset up to the next row's (or the end
	// of Code). The first row should be at offset 0.
	Lines []LineRow
	// CFI is the call frame program for this procedure, on top of the
	// architecture's standard CIE (CFA = SP + PtrSize, return address at
	// CFA - PtrSize). Insn.PC values are offsets into Code, sorted.
	CFI []frame.Insn
	// SignalFrame puts the procedure's FDE on a CIE with augmentation "S"
	// (LSB "Exception Frames"; DWARF 5 section 6.4.1 leaves it to
	// producers): its caller's pc is used as is, not as a return address,
	// and debuggers treat the frame as a stack switch. gdb accepts a
	// caller frame on another stack (a CFA at a lower address) only below
	// such a frame; it shows the frame as "<signal handler called>".
	SignalFrame bool
	// Params are the formal parameters in order: the required ones, then
	// the optional ones (Var.Optional). Link refuses more than
	// native.MaxArgs (6), the most native.Call passes.
	Params []Var
	// Result is the type of the value the procedure returns (DW_AT_type
	// of its DW_TAG_subprogram); nil means the default integer type (see
	// Var.Type), or none for an Internal procedure; a KindVoid type means
	// none.
	Result *Type
	// Scopes are the lexical scopes of the body (let, let*, named let),
	// outermost first; each may nest further scopes.
	Scopes []*Scope
	// Properties are the procedure's metadata as name/value pairs in
	// source order (for example from (declare (inline #f))).
	Properties []Property
	// Relocs are link-time relocations in Code.
	Relocs []Reloc
}

// Scope is a lexical scope: the code ranges it covers and the variables it
// binds (DW_TAG_lexical_block, DWARF 5 section 3.5).
type Scope struct {
	// Ranges are the code offsets [Start, End) of the scope, sorted and
	// disjoint; more than one when the compiler split the scope's code.
	Ranges []CodeRange
	// Vars are the variables the scope binds, in binding order.
	Vars []Var
	// Scopes are the scopes nested in this one.
	Scopes []*Scope
}

// CodeRange is a half-open range [Start, End) of code offsets of a Proc.
type CodeRange struct {
	Start, End uint32
}

// Property is one item of procedure metadata: a name and a value, both
// as the source wrote them.
type Property struct {
	Name, Value string
}

// LineRow is one line-table row: from code Offset on, the code comes from
// Line and Column of the Module's File (1-based; Column 0 means unknown).
type LineRow struct {
	Offset       uint32
	Line, Column uint32
	// IsStmt marks a recommended breakpoint location (DW_LNS_negate_stmt).
	IsStmt bool
	// PrologueEnd marks the first instruction after the prologue
	// (DW_LNS_set_prologue_end).
	PrologueEnd bool
}

// Var is a named value (a parameter or a variable), its type and where it
// lives. Locations are DWARF location expressions (DWARF 5 section 2.6),
// built with package dwarf/expr: expr.Fbreg(-24) or expr.Reg(3) for a
// value in memory or a register, or an expression ending in
// expr.Code.StackValue for a value computed from them (a tagged fixnum
// untagged by a shift). The frame base of every Proc is
// DW_OP_call_frame_cfa, so fbreg offsets are relative to the CFA. Names
// are unique among a procedure's parameters and among the variables of
// one scope.
type Var struct {
	Name string
	// Type is the value's type; nil means the default, an 8-byte signed
	// integer named "integer" (the language's integers).
	Type *Type
	// Location, when Live is empty, is one expression valid wherever the
	// variable is in scope (for a parameter: from the end of the
	// prologue on).
	Location []byte
	// Live, when not empty, is exact: the value is available only in
	// these code ranges, each with its own location, sorted and disjoint
	// (it becomes a location list, DWARF 5 section 2.6.2). Outside them a
	// debugger shows the variable as optimized out.
	Live []LiveRange
	// Line and Column give where the variable is declared (0 unknown).
	Line, Column int
	// Optional marks an optional parameter; Default is the source text
	// of its default value expression (empty when none was written).
	Optional bool
	Default  string
}

// LiveRange says that over the code offsets [Start, End) a variable's
// value is at Location.
type LiveRange struct {
	Start, End uint32
	Location   []byte
}

// RelocType is a link-time relocation kind, named by what it computes
// (S is the target symbol's address, A the addend, P the address of the
// field being relocated).
type RelocType uint8

const (
	// RelocPC32 stores S + A - P as a signed 32-bit value (R_X86_64_PC32
	// semantics); resolved by the linker, nothing left for load time.
	RelocPC32 RelocType = iota + 1
	// RelocAbs64 stores S + A as a 64-bit address (R_X86_64_64
	// semantics). Only allowed in Module.Data: the linker writes the
	// link-time value and a R_X86_64_RELATIVE dynamic relocation so the
	// loader adds the load base.
	RelocAbs64
	// RelocAArch64Call26 patches the imm26 field (bits 0-25) of an
	// AArch64 BL instruction at Offset with (S + A - P) >> 2
	// (R_AARCH64_CALL26 semantics, "ELF for the Arm 64-bit Architecture"
	// (AAELF64) §5.7.8, table "Call and branch relocations"): S + A - P
	// must be a multiple of 4 in [-2^27, 2^27), ±128 MiB, else Link
	// returns a *LinkError naming the procedure and offset. Only in
	// Proc.Relocs of an AArch64 module; resolved by the linker, or, in an
	// object ([LinkObject]), written as an R_AARCH64_CALL26 relocation
	// whose range the system linker checks (GNU ld and lld add a veneer
	// for a target beyond it).
	RelocAArch64Call26
	// RelocAArch64Jump26 is RelocAArch64Call26 for an AArch64 B
	// instruction (R_AARCH64_JUMP26 semantics, AAELF64 §5.7.8): the same
	// field, value and range, for a tail call (R_AARCH64_JUMP26 in an
	// object).
	RelocAArch64Jump26
	// RelocAArch64AdrPage21 patches the immhi:immlo field (bits 5-23 and
	// 29-30) of an AArch64 ADRP instruction with
	// (Page(S + A) - Page(P)) >> 12, where Page(x) is x with its low 12
	// bits cleared (R_AARCH64_ADR_PREL_PG_HI21 semantics, AAELF64 §5.7.6,
	// table "Relocations to generate 19, 21 and 33 bit PC-relative
	// addresses"); the page distance must be within ±4 GiB. Pair it with
	// RelocAArch64AddLo12 on the ADD that follows. Only in Proc.Relocs
	// of an AArch64 module (R_AARCH64_ADR_PREL_PG_HI21 in an object).
	RelocAArch64AdrPage21
	// RelocAArch64AddLo12 patches the imm12 field (bits 10-21) of an
	// AArch64 ADD (immediate) instruction with (S + A) & 0xfff
	// (R_AARCH64_ADD_ABS_LO12_NC semantics, AAELF64 §5.7.6; no overflow
	// check, by definition). Only in Proc.Relocs of an AArch64 module
	// (R_AARCH64_ADD_ABS_LO12_NC in an object).
	RelocAArch64AddLo12
	// RelocAArch64Adr21 patches the immhi:immlo field of an AArch64 ADR
	// instruction with S + A - P (R_AARCH64_ADR_PREL_LO21 semantics,
	// AAELF64 §5.7.6), which must be in [-2^20, 2^20), ±1 MiB. Only in
	// Proc.Relocs of an AArch64 module (R_AARCH64_ADR_PREL_LO21 in an
	// object).
	RelocAArch64Adr21
)

// Reloc asks the linker to patch a field at Offset in a Proc's Code or a
// Datum's Bytes with a value derived from the address of Symbol, the name
// of a Proc or Datum of the same Module.
type Reloc struct {
	Offset uint32
	Type   RelocType
	Symbol string
	Addend int64
}

// Datum is a named block of constant bytes.
type Datum struct {
	Name   string
	Bytes  []byte
	Align  int // power of two; 0 means 8
	Relocs []Reloc
}
