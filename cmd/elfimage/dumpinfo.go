package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
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

// exprString prints a DWARF expression operation by operation (package
// dwarf/expr decodes it), register and frame base offsets as
// DW_OP_breg5(8); a malformed expression as its bytes.
func exprString(b []byte) string {
	ops, err := expr.Decode(b, expr.Params{AddrSize: 8})
	if err != nil {
		return fmt.Sprintf("<malformed: % x>", b)
	}
	parts := make([]string, len(ops))
	for i, o := range ops {
		switch {
		case o.Op == dwarf.DW_OP_fbreg:
			parts[i] = fmt.Sprintf("%v(%d)", o.Op, int64(o.Args[0]))
		case o.Op >= dwarf.DW_OP_breg0 && o.Op <= dwarf.DW_OP_breg31:
			parts[i] = fmt.Sprintf("DW_OP_breg%d(%d)", o.Op-dwarf.DW_OP_breg0, int64(o.Args[0]))
		default:
			parts[i] = o.String()
		}
	}
	return strings.Join(parts, " ")
}
