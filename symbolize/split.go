package symbolize

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/formaterr"
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
			r.err = &formaterr.Error{Source: secInfo, Offset: u.hdr.Offset, Field: "DW_AT_dwo_name", Msg: "skeleton unit without a .dwo name"}
			return
		}
		var tried []error
		if dp, err := d.package_(); err == nil {
			dd, ui, err := d.loadFromPackage(dp, u)
			if err == nil {
				r.d, r.ui, r.err = dd, ui, nil
				return
			}
			tried = append(tried, err)
		} else if !errors.Is(err, os.ErrNotExist) {
			tried = append(tried, err)
		}
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

// dwpFile is a DWARF package file: its index and sections.
type dwpFile struct {
	path  string
	index *cuIndex
	secs  map[string][]byte // ".debug_info" → .debug_info.dwo, ...
}

// dwpSections are the package sections read, by DW_SECT_* column (0:
// shared by every unit, not indexed).
var dwpSections = []struct {
	name string
	sect int
}{
	{".debug_info", sectInfo}, {".debug_abbrev", sectAbbrev}, {".debug_str_offsets", sectStrOffsets},
	{".debug_rnglists", sectRngLists}, {".debug_loclists", sectLocLists}, {".debug_str", 0},
}

// package_ returns the DWARF package file beside the file read (its path
// followed by ".dwp", where gdb and LLVM look), read once. Errors wrap
// os.ErrNotExist when there is none.
func (d *dwarfData) package_() (*dwpFile, error) {
	d.dwpOnce.Do(func() {
		if d.dwpPath == "" {
			d.dwpErr = os.ErrNotExist
			return
		}
		f, err := elfobj.Open(d.dwpPath)
		if err != nil {
			d.dwpErr = fmt.Errorf("symbolize: split DWARF: %w", err)
			return
		}
		defer f.Close()
		if f.Size() > maxDWOSize {
			d.dwpErr = fmt.Errorf("symbolize: split DWARF: %s: %d bytes, more than %d", d.dwpPath, f.Size(), maxDWOSize)
			return
		}
		dp := &dwpFile{path: d.dwpPath, secs: map[string][]byte{}}
		ib, err := f.DebugSection(secCUIndex)
		if err == nil && ib == nil {
			err = fmt.Errorf("no %s", secCUIndex)
		}
		if err == nil {
			dp.index, err = parseCUIndex(ib, d.sec.Order)
		}
		for _, s := range dwpSections {
			if err != nil {
				break
			}
			dp.secs[s.name], err = f.DebugSection(s.name + ".dwo")
		}
		if err != nil {
			d.dwpErr = fmt.Errorf("symbolize: split DWARF: %s: %w", d.dwpPath, err)
			return
		}
		d.dwp = dp
	})
	return d.dwp, d.dwpErr
}

// loadFromPackage finds the split unit of skeleton u in the package: its
// row by dwo_id, and each section cut to the unit's contribution (so that
// the unit's bases are just past the contributions' headers, as in a .dwo
// file).
func (d *dwarfData) loadFromPackage(dp *dwpFile, u *unit) (*dwarfData, int, error) {
	id, _ := dwoID(u)
	row, ok := dp.index.lookup(id)
	if !ok {
		return nil, 0, fmt.Errorf("symbolize: split DWARF: %s has no unit with dwo_id %#x", dp.path, id)
	}
	cut := map[string][]byte{}
	for _, s := range dwpSections {
		b := dp.secs[s.name]
		if s.sect == 0 {
			cut[s.name] = b
			continue
		}
		c, ok := dp.index.contribution(row, s.sect)
		if !ok {
			continue
		}
		if c.off > uint64(len(b)) || c.size > uint64(len(b))-c.off {
			return nil, 0, &formaterr.Error{Source: secCUIndex, Offset: dp.index.offsOff, Field: "section offset",
				Msg: fmt.Sprintf("row %d: [%#x, +%#x) runs past %s.dwo (%d bytes)", row, c.off, c.size, s.name, len(b))}
		}
		cut[s.name] = b[c.off : c.off+c.size : c.off+c.size]
	}
	dd, err := d.loadSplit(func(name string) ([]byte, error) { return cut[name], nil })
	if err != nil {
		return nil, 0, fmt.Errorf("symbolize: split DWARF: %s: %w", dp.path, err)
	}
	return d.adoptSplit(dd, u, dp.path)
}

// loadSplit loads the DWARF of a .dwo (or a package's contribution) whose
// sections dwo returns by their names without ".dwo"; the skeleton's file
// gives .debug_addr and the line table.
func (d *dwarfData) loadSplit(dwo func(name string) ([]byte, error)) (*dwarfData, error) {
	dd, err := loadLive(func(name string) ([]byte, error) {
		switch name {
		case ".debug_addr":
			return d.sec.Addr, nil
		case ".debug_line":
			return d.line, nil
		case ".debug_line_str":
			return d.sec.LineStr, nil
		case ".debug_ranges":
			return d.ranges, nil // GNU DWARF 4: the skeleton's file's, from DW_AT_GNU_ranges_base
		}
		return dwo(name)
	}, d.sec.Order, d.live)
	if err == nil && dd == nil {
		err = errors.New("no .debug_info.dwo")
	}
	if dd != nil {
		dd.slab = d.slab // released with d's
	}
	return dd, err
}

// adoptSplit finds the split unit of skeleton u in dd (loaded from p) and
// gives it what it takes from the skeleton.
func (d *dwarfData) adoptSplit(dd *dwarfData, u *unit, p string) (*dwarfData, int, error) {
	id, ok := dwoID(u)
	if !ok {
		return nil, 0, &formaterr.Error{Source: secInfo, Offset: u.hdr.Offset, Field: "DW_AT_GNU_dwo_id", Msg: "skeleton unit without a dwo_id"}
	}
	for i := range dd.units {
		su := &dd.units[i]
		gnu := su.hdr.Enc.Version < 5
		if sid, ok := dwoID(su); !ok || sid != id || !gnu && su.hdr.Type != dwarf.DW_UT_split_compile {
			continue
		}
		h := *su.hdr
		h.AddrBase = u.hdr.AddrBase
		if gnu {
			h.StrOffsetsBase = 0 // a DWARF 4 .debug_str_offsets.dwo has no header
			su.rangesBase = u.root.rangesBase
		}
		su.hdr = &h
		su.root.stmtList, su.root.hasStmt = u.root.stmtList, u.root.hasStmt
		su.compDir, su.base = u.compDir, u.base
		return dd, i, nil
	}
	return nil, 0, fmt.Errorf("symbolize: split DWARF: %s has no split unit with dwo_id %#x", p, id)
}

// dwoID returns the dwo_id of a skeleton or split unit: the header's in
// DWARF 5, DW_AT_GNU_dwo_id before.
func dwoID(u *unit) (uint64, bool) {
	if u.hdr.Enc.Version >= 5 {
		return u.hdr.Signature, u.hdr.Type == dwarf.DW_UT_skeleton || u.hdr.Type == dwarf.DW_UT_split_compile
	}
	return u.root.dwoID, u.root.hasDwoID
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
	dd, err := d.loadSplit(func(name string) ([]byte, error) { return f.DebugSection(name + ".dwo") })
	if err != nil {
		return nil, 0, fmt.Errorf("symbolize: split DWARF: %s: %w", p, err)
	}
	return d.adoptSplit(dd, u, p)
}
