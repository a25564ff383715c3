package frame

import (
	"strconv"

	"github.com/elfimage/elfimage/arch"
)

// Op names a call frame instruction in semantic terms (DWARF 5 section
// 6.4.2). Writers take these and choose the shortest encoding; readers
// decode the byte-level instructions into them.
type Op uint8

// Call frame operations. Offsets in [Insn] are in bytes, never factored:
// the encoder divides by the CIE's data alignment factor.
const (
	OpNop              Op = iota
	OpDefCFA              // CFA = Reg + Offset
	OpDefCFARegister      // CFA = Reg + (current offset)
	OpDefCFAOffset        // CFA = (current register) + Offset
	OpDefCFAExpression    // CFA = value of Expr
	OpOffset              // Reg saved at address CFA + Offset
	OpValOffset           // Reg's value is CFA + Offset
	OpRegister            // Reg saved in register Reg2
	OpExpression          // Reg saved at address given by Expr (CFA pushed first)
	OpValExpression       // Reg's value is the value of Expr (CFA pushed first)
	OpRestore             // Reg's rule reverts to the CIE's initial rule
	OpUndefined           // Reg has no recoverable value (for the return-address column: outermost frame)
	OpSameValue           // Reg is unchanged from the caller
	OpRememberState       // push the whole row's rules
	OpRestoreState        // pop the rules pushed last
	OpArgsSize            // DW_CFA_GNU_args_size: Offset bytes of outgoing arguments
)

// Insn is one call frame instruction that takes effect at code offset PC
// (bytes from the start of the FDE's range; the encoder emits the advance
// instructions between Insns). Insns of one FDE are sorted by PC.
type Insn struct {
	PC     uint64
	Op     Op
	Reg    arch.Reg // the register the rule is for, or the CFA register
	Reg2   arch.Reg // OpRegister: where Reg is saved
	Offset int64    // bytes
	Expr   []byte   // DWARF expression for the *Expression ops
}

// OpAdvanceLoc is produced only by the decoder: the location moved to PC
// (DW_CFA_advance_loc*, DW_CFA_set_loc), which ends the current row. Writers
// need not use it (the encoder advances to each Insn's PC by itself); if
// given, the encoder emits the advance and nothing else.
const OpAdvanceLoc Op = OpArgsSize + 1

// OpNegateRAState is DW_CFA_AARCH64_negate_ra_state (opcode 0x2d, shared
// with DW_CFA_GNU_window_save): it toggles whether the return address is
// signed by pointer authentication (AArch64 PAC-RET) from this location on;
// [Row.RASigned] records the state. On SPARC the same opcode means
// DW_CFA_GNU_window_save, which this package does not model beyond
// recording it.
const OpNegateRAState Op = OpAdvanceLoc + 1

var opNames = [...]string{
	OpNop:              "nop",
	OpDefCFA:           "def_cfa",
	OpDefCFARegister:   "def_cfa_register",
	OpDefCFAOffset:     "def_cfa_offset",
	OpDefCFAExpression: "def_cfa_expression",
	OpOffset:           "offset",
	OpValOffset:        "val_offset",
	OpRegister:         "register",
	OpExpression:       "expression",
	OpValExpression:    "val_expression",
	OpRestore:          "restore",
	OpUndefined:        "undefined",
	OpSameValue:        "same_value",
	OpRememberState:    "remember_state",
	OpRestoreState:     "restore_state",
	OpArgsSize:         "args_size",
	OpAdvanceLoc:       "advance_loc",
	OpNegateRAState:    "negate_ra_state",
}

// String returns the operation's name in the spec's words without the
// DW_CFA_ prefix ("def_cfa", "offset"), or "op(N)" for an unknown value.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}
