package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/elfobj"
	inspectpkg "github.com/elfimage/elfimage/internal/inspect"
)

// debugInfo returns the DWARF of f (for an image of ours, the loader's
// reader of it) and its sections, or nil when f has no .debug_info.
func debugInfo(f *elfobj.File, img *elfimage.Image) (*info.Data, *inspectpkg.DebugSections, error) {
	sec, err := inspectpkg.ReadDebugSections(f)
	if err != nil {
		return nil, nil, err
	}
	if img != nil {
		d, err := img.DebugInfo()
		return d, sec, err
	}
	if sec.Info.Info == nil {
		return nil, sec, nil
	}
	d, err := info.New(sec.Info)
	return d, sec, err
}

// dumpInfo prints the DIE tree of .debug_info, one DIE per line indented
// by depth, with every attribute decoded by its class and location and
// range lists expanded below their attribute.
func dumpInfo(w io.Writer, f *elfobj.File, img *elfimage.Image) error {
	d, sec, err := debugInfo(f, img)
	if err != nil {
		return err
	}
	if d == nil {
		fmt.Fprintf(w, "Debug information: none (no .debug_info)\n\n")
		return nil
	}
	fmt.Fprintf(w, "Debug information (.debug_info, %d units):\n", len(d.Units()))
	err = inspectpkg.DebugInfo(d, sec, func(u inspectpkg.Unit) error {
		inspectpkg.WriteUnit(w, u)
		return nil
	})
	fmt.Fprintln(w)
	return err
}

// dumpLinePrograms prints every line program of .debug_line of any ELF
// file, as llvm-dwarfdump --debug-line does.
func dumpLinePrograms(w io.Writer, f *elfobj.File) error {
	d, sec, err := debugInfo(f, nil)
	if err != nil {
		return err
	}
	var dirs map[uint64]string
	if d != nil {
		dirs = inspectpkg.CompDirs(d)
	}
	fmt.Fprintf(w, ".debug_line contents:\n")
	return inspectpkg.DebugLine(sec.Line, dirs, func(p inspectpkg.LineProgram) error {
		inspectpkg.WriteLineProgram(w, p)
		return nil
	})
}

// dumpDoc is dump's JSON form: the views asked for, each under its name.
type dumpDoc struct {
	Header       *inspectpkg.Header        `json:",omitempty"`
	Programs     []inspectpkg.Program      `json:",omitempty"`
	Sections     []inspectpkg.Section      `json:",omitempty"`
	SymbolTables []inspectpkg.SymbolTable  `json:",omitempty"`
	Notes        []inspectpkg.Note         `json:",omitempty"`
	Dynamic      []inspectpkg.Dyn          `json:",omitempty"`
	Relocations  []inspectpkg.RelocSection `json:",omitempty"`
	Units        []inspectpkg.Unit         `json:",omitempty"`
	LinePrograms []inspectpkg.LineProgram  `json:",omitempty"`
	Image        *imageDoc                 `json:",omitempty"`
	Procedures   []elfimage.Procedure      `json:",omitempty"`
}

// imageDoc is what the loader knows of an image of ours.
type imageDoc struct {
	BuildID   string   `json:",omitempty"`
	DebugFile string   `json:",omitempty"`
	LoadNotes []string `json:",omitempty"`
}

// dumpJSON prints the views as one JSON object.
func dumpJSON(w *bufio.Writer, f *elfobj.File, img *elfimage.Image, v dumpViews) error {
	var doc dumpDoc
	var err error
	if v.headers {
		h := inspectpkg.FileHeader(f)
		doc.Header, doc.Programs = &h, inspectpkg.ProgramHeaders(f)
		if img != nil {
			doc.Image = &imageDoc{BuildID: hex.EncodeToString(img.BuildID()), LoadNotes: img.LoadNotes()}
			doc.Image.DebugFile, _ = img.DebugFile()
		}
	}
	if v.sections {
		doc.Sections = inspectpkg.Sections(f)
	}
	if v.symbols {
		if doc.SymbolTables, err = inspectpkg.SymbolTables(f); err != nil {
			return err
		}
	}
	if v.notes {
		if doc.Notes, err = inspectpkg.Notes(f); err != nil {
			return err
		}
	}
	if v.dynamic {
		if doc.Dynamic, err = inspectpkg.Dynamic(f); err != nil {
			return err
		}
	}
	if v.relocs {
		if doc.Relocations, err = inspectpkg.Relocations(f); err != nil {
			return err
		}
	}
	if v.procs && img != nil {
		if doc.Procedures, err = img.Procedures(); err != nil {
			return err
		}
	}
	if v.info || v.lines {
		d, sec, err := debugInfo(f, img)
		if err != nil {
			return err
		}
		if v.info && d != nil {
			if err := inspectpkg.DebugInfo(d, sec, func(u inspectpkg.Unit) error {
				doc.Units = append(doc.Units, u)
				return nil
			}); err != nil {
				return err
			}
		}
		if v.lines {
			var dirs map[uint64]string
			if d != nil {
				dirs = inspectpkg.CompDirs(d)
			}
			if err := inspectpkg.DebugLine(sec.Line, dirs, func(p inspectpkg.LineProgram) error {
				doc.LinePrograms = append(doc.LinePrograms, p)
				return nil
			}); err != nil {
				return err
			}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(doc)
}
