package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
)

// dumpInfo prints the DIE tree of .debug_info, one DIE per line indented
// by depth, with every attribute decoded by its class.
func dumpInfo(w io.Writer, img *elfimage.Image) error {
	d, err := img.DebugInfo()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Debug information (.debug_info, %d units):\n", len(d.Units()))
	r := d.Reader()
	depth := 0
	for {
		e, err := r.Next()
		if err != nil {
			return err
		}
		if e == nil {
			break
		}
		if e.Tag == 0 {
			if depth > 0 { // malformed input may end more lists than it opened
				depth--
			}
			continue
		}
		if u := r.Unit(); u != nil && e.Offset == u.DataOffset {
			fmt.Fprintf(w, "  unit at %#x: DWARF %d, %v, address size %d\n", u.Offset, u.Enc.Version, u.Enc.Format, u.Enc.AddrSize)
			depth = 0
		}
		ind := strings.Repeat("  ", depth+1)
		fmt.Fprintf(w, "%s<%#x> %v\n", ind, e.Offset, e.Tag)
		for _, f := range e.Fields {
			fmt.Fprintf(w, "%s    %-28v %s\n", ind, f.Attr, fieldString(f))
		}
		if e.Children {
			depth++
		}
	}
	fmt.Fprintln(w)
	return nil
}

func fieldString(f info.Field) string {
	switch f.Class {
	case info.ClassString:
		return fmt.Sprintf("%q", f.Str)
	case info.ClassAddress:
		return fmt.Sprintf("%#x", f.Val)
	case info.ClassReference:
		return fmt.Sprintf("<%#x>", f.Val)
	case info.ClassFlag:
		return fmt.Sprint(f.Val != 0)
	case info.ClassSecOffset:
		return fmt.Sprintf("section offset %#x", f.Val)
	case info.ClassExprloc, info.ClassBlock:
		return exprString(f.Block)
	case info.ClassConstant:
		switch f.Attr {
		case dwarf.DW_AT_encoding:
			return dwarf.ATE(f.Val).String()
		case dwarf.DW_AT_language:
			return dwarf.Lang(f.Val).String()
		}
		if f.Form == dwarf.DW_FORM_sdata || f.Form == dwarf.DW_FORM_implicit_const {
			return fmt.Sprint(int64(f.Val))
		}
		return fmt.Sprint(f.Val)
	}
	return fmt.Sprintf("%v %#x", f.Form, f.Val)
}

// exprString prints a DWARF expression with the operands of the
// operations our writers use, and the raw bytes otherwise.
func exprString(b []byte) string {
	var parts []string
	for len(b) > 0 {
		op := dwarf.Op(b[0])
		b = b[1:]
		switch {
		case op == dwarf.DW_OP_fbreg || (op >= dwarf.DW_OP_breg0 && op <= dwarf.DW_OP_breg31):
			v, n := dwarf.Sleb128(b)
			if n == 0 {
				return strings.Join(append(parts, op.String(), "<truncated>"), " ")
			}
			b = b[n:]
			name := op.String()
			if op != dwarf.DW_OP_fbreg {
				name = fmt.Sprintf("DW_OP_breg%d", op-dwarf.DW_OP_breg0)
			}
			parts = append(parts, fmt.Sprintf("%s(%d)", name, v))
		case op >= dwarf.DW_OP_reg0 && op <= dwarf.DW_OP_reg31:
			parts = append(parts, fmt.Sprintf("DW_OP_reg%d", op-dwarf.DW_OP_reg0))
		case op >= dwarf.DW_OP_lit0 && op <= dwarf.DW_OP_lit31:
			parts = append(parts, fmt.Sprintf("DW_OP_lit%d", op-dwarf.DW_OP_lit0))
		case op == dwarf.DW_OP_call_frame_cfa || op == dwarf.DW_OP_stack_value:
			parts = append(parts, op.String())
		default:
			return strings.Join(append(parts, fmt.Sprintf("%v % x", op, b)), " ")
		}
	}
	return strings.Join(parts, " ")
}
