package symbolize

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/elfobj"
)

// Split DWARF (DWARF 5 section 3.1.3, "Skeleton Compilation Unit
// Entries", and 7.3.2, "Split DWARF Object Files"): the executable keeps a
// skeleton unit per compile unit (its address ranges, its line table, its
// .debug_addr contribution, DW_AT_dwo_name and the dwo_id in its header);
// the DIEs are in a split compile unit of the .dwo file the skeleton names,
// with the same dwo_id, whose sections are .debug_info.dwo,
// .debug_abbrev.dwo, .debug_str.dwo, .debug_str_offsets.dwo and
// .debug_rnglists.dwo (each holding that one unit's contribution, so that
// their bases are just past their headers). The split unit uses the
// skeleton's line table (for DW_AT_call_file), its .debug_addr with the
// skeleton's DW_AT_addr_base, and the skeleton's DW_AT_low_pc as the base
// address of its range lists.

// splitRef is the split compile unit of one skeleton unit, found once.
type splitRef struct {
	once sync.Once
	d    *dwarfData // the .dwo file's DWARF
	ui   int        // the split unit in d.units
	err  error
}

// maxDWOSize bounds a .dwo file read for one skeleton unit, in bytes.
const maxDWOSize = 1 << 30

// splitUnit returns the DWARF of skeleton unit u's .dwo file and the
// index of its split unit there: DW_AT_dwo_name, under DW_AT_comp_dir
// when relative, else beside the file being symbolized (d.dir). Errors
// name the .dwo path: it cannot be opened, has no split unit with u's
// dwo_id, or is malformed.
func (d *dwarfData) splitUnit(u *unit) (*dwarfData, int, error) {
	r := u.split
	r.once.Do(func() {
		r.err = errors.New("symbolize: no .dwo read") // until the load completes (a fault panics out)
		name, ok := d.str(u, u.root.dwoName)
		if !ok || len(name) == 0 {
			r.err = &dwarf.FormatError{Section: secInfo, Offset: u.hdr.Offset, Field: "DW_AT_dwo_name", Msg: "skeleton unit without a .dwo name"}
			return
		}
		var tried []error
		for _, p := range dwoPaths(string(name), u.compDir, d.dir) {
			dd, ui, err := d.loadDWO(p, u)
			if err == nil {
				r.d, r.ui, r.err = dd, ui, nil
				return
			}
			tried = append(tried, err)
		}
		r.err = errors.Join(tried...)
	})
	return r.d, r.ui, r.err
}

// dwoPaths returns where the .dwo file name is looked for.
func dwoPaths(name, compDir, dir string) []string {
	if filepath.IsAbs(name) {
		return []string{name}
	}
	var out []string
	if compDir != "" {
		out = append(out, filepath.Join(compDir, name))
	}
	if dir != "" {
		out = append(out, filepath.Join(dir, name), filepath.Join(dir, filepath.Base(name)))
	}
	if len(out) == 0 {
		out = append(out, name)
	}
	return out
}

// loadDWO reads the .dwo file at p and finds the split unit of skeleton
// u in it.
func (d *dwarfData) loadDWO(p string, u *unit) (*dwarfData, int, error) {
	f, err := elfobj.Open(p)
	if err != nil {
		return nil, 0, fmt.Errorf("symbolize: split DWARF: %w", err)
	}
	defer f.Close()
	if f.Size() > maxDWOSize {
		return nil, 0, fmt.Errorf("symbolize: split DWARF: %s: %d bytes, more than %d", p, f.Size(), maxDWOSize)
	}
	dd, err := loadSections(func(name string) ([]byte, error) {
		switch name {
		case ".debug_addr":
			return d.sec.Addr, nil
		case ".debug_line":
			return d.line, nil
		case ".debug_line_str":
			return d.sec.LineStr, nil
		case ".debug_ranges":
			return nil, nil
		}
		return f.DebugSection(name + ".dwo")
	})
	if err != nil {
		return nil, 0, fmt.Errorf("symbolize: split DWARF: %s: %w", p, err)
	}
	if dd == nil {
		return nil, 0, fmt.Errorf("symbolize: split DWARF: %s has no .debug_info.dwo", p)
	}
	for i := range dd.units {
		su := &dd.units[i]
		if su.hdr.Type != dwarf.DW_UT_split_compile || su.hdr.Signature != u.hdr.Signature {
			continue
		}
		h := *su.hdr
		h.AddrBase = u.hdr.AddrBase
		su.hdr = &h
		su.root.stmtList, su.root.hasStmt = u.root.stmtList, u.root.hasStmt
		su.compDir, su.base = u.compDir, u.base
		return dd, i, nil
	}
	return nil, 0, fmt.Errorf("symbolize: split DWARF: %s has no split unit with dwo_id %#x", p, u.hdr.Signature)
}
