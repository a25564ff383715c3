package symbolize

import (
	"encoding/binary"

	"github.com/elfimage/elfimage/dwarf"
)

// DIEAttrs are the attributes readAttrs decoded from one DIE, strings
// resolved, for the differential test against debug/dwarf.
type DIEAttrs struct {
	Offset                      uint64 // of a unit's root DIE; 0 for the others
	Root                        bool
	LowPC, HighPC               uint64
	HasLow, HasHigh, HighIsLen  bool
	Ranges                      uint64
	HasRanges                   bool
	Name, Linkage, CompDir      string
	Spec, Origin                uint64 // ^0 when absent
	CallFile, CallLine, CallCol uint64
	StmtList                    uint64
	HasStmt                     bool
}

// ReadDIEs loads the DWARF sections that section returns and gives, for
// every compile unit in order, its root DIE and then its subprogram and
// inlined_subroutine DIEs in preorder, as symbolization reads them.
func ReadDIEs(section func(name string) ([]byte, error)) ([]DIEAttrs, error) {
	out, _, err := ReadDIEsPath(section, false)
	return out, err
}

// ReadDIEsPath is ReadDIEs with readAttrs' in-place path for fixed-size
// DIEs turned off when slow is set; fixed counts, over the units, the
// subprogram and inlined_subroutine abbreviations of their tables that
// have an in-place plan (0: the in-place path is never taken).
func ReadDIEsPath(section func(name string) ([]byte, error), slow bool) (out []DIEAttrs, fixed int, err error) {
	defer func(old bool) { slowAttrs = old }(slowAttrs)
	slowAttrs = slow
	out, fixed, err = readDIEs(section)
	return out, fixed, err
}

func readDIEs(section func(name string) ([]byte, error)) ([]DIEAttrs, int, error) {
	d, err := loadSections(section, binary.LittleEndian)
	if err != nil {
		return nil, 0, err
	}
	fixed := 0
	var out []DIEAttrs
	conv := func(u *unit, a *attrs) DIEAttrs {
		name, _ := d.str(u, a.name)
		link, _ := d.str(u, a.linkage)
		dir, _ := d.str(u, a.compDir)
		return DIEAttrs{LowPC: a.lowPC, HighPC: a.highPC, HasLow: a.hasLow, HasHigh: a.hasHigh, HighIsLen: a.highIsLen,
			Ranges: a.ranges, HasRanges: a.hasRanges, Name: string(name), Linkage: string(link), CompDir: string(dir),
			Spec: a.spec, Origin: a.origin, CallFile: a.callFile, CallLine: a.callLine, CallCol: a.callCol,
			StmtList: a.stmtList, HasStmt: a.hasStmt}
	}
	for i := range d.units {
		u := &d.units[i]
		r := conv(u, &u.root)
		r.Offset, r.Root = u.hdr.DataOffset, true
		out = append(out, r)
		t, err := d.abbrevTable(u)
		if err != nil {
			return nil, 0, err
		}
		for i := range t.dense {
			if a := &t.dense[i]; a.fixedOK && (a.tag == dwarf.DW_TAG_subprogram || a.tag == dwarf.DW_TAG_inlined_subroutine) {
				fixed++
			}
		}
		if _, err := d.walkSubrs(u, t, nil, func(a *attrs, inlined bool, me, parent int32) error {
			out = append(out, conv(u, a))
			return nil
		}); err != nil {
			return nil, 0, err
		}
	}
	return out, fixed, nil
}
