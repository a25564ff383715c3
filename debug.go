package elfimage

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/elfobj"
)

// ErrNoDebugFile is wrapped by the errors of the debug queries of a
// stripped image (one without .debug_info) whose debug file was not
// found or is not its own; the error also wraps [ErrNoSection] and, when
// nothing was found, debugfile.ErrNotFound with every path tried.
var ErrNoDebugFile = errors.New("elfimage: the image is stripped and its debug file is not available")

// debugFileState is an image's debug file, found and mapped on the first
// query that needs a section the image does not have.
type debugFileState struct {
	once sync.Once
	own  bool   // the image has its debug sections: no debug file
	path string // the debug file, once found
	mem  []byte // its bytes, mapped read-only (unmapped with the image)
	secs []SectionHeader
	err  error
}

// LoadNotes returns what the loader ignored in the image, one sentence
// each naming the file and the program header: OS-range program headers
// of ours (PTProcTable, PTLineProgram, PTLineStrings) left empty or
// pointing past the end of the file by a strip tool that removed their
// sections. The queries then find those sections through the section
// headers or in the debug file. The slice is shared: do not modify it.
func (im *Image) LoadNotes() []string { return im.notes }

// DebugFile returns the path of the image's separate debug file, finding
// and mapping it on first use: "" when the image holds its own debug
// information (it has .debug_info), the file's path when the image is
// stripped and the file was found (LoadOptions.DebugFiles: by build ID
// under its debug directories, by the .gnu_debuglink beside the image, in
// its .debug directory and under the directories, then its Remote source)
// and is the image's (same build ID). The
// debug queries ([Image.PositionAt], [Image.Locals], [Image.ProcedureAt],
// ...) of a stripped image read their sections from it. Errors wrap
// [ErrNoDebugFile] (and a *debugfile.NotFoundError, wrapping
// debugfile.ErrNotFound and listing every path tried, when none was found), or are the *FormatError of a damaged debug file.
// Cost on first use: one stat per candidate, an mmap of the debug file
// and a parse of its section headers.
func (im *Image) DebugFile() (_ string, err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	if _, err := im.Sections(); err != nil {
		return "", err // the image's own section table is damaged
	}
	st := im.debugFileState()
	if st.err != nil && st.err != errIndexFault {
		return "", &noDebugError{path: im.path, err: st.err}
	}
	return st.path, st.err
}

// debugSection returns the section the debug queries ask for: the
// image's own, or, for a stripped image, its debug file's. An absent
// section gives an error wrapping ErrNoSection (and ErrNoDebugFile when
// the debug file is what is missing).
func (im *Image) debugSection(name string) ([]byte, error) {
	b, err := im.Section(name)
	if err == nil || !errors.Is(err, ErrNoSection) {
		return b, err
	}
	st := im.debugFileState()
	switch {
	case st.own:
		return nil, err
	case st.err != nil:
		return nil, &noDebugError{path: im.path, section: name, err: st.err}
	}
	for i := range st.secs {
		s := &st.secs[i]
		if s.Name != name {
			continue
		}
		if s.Type == elf.SHT_NOBITS {
			break
		}
		return st.mem[s.Offset : s.Offset+s.Size : s.Offset+s.Size], nil
	}
	return nil, fmt.Errorf("elfimage: %s: section %q is in neither the image nor its debug file %s: %w", im.path, name, st.path, ErrNoSection)
}

// noDebugError is the error of a debug query (of DebugFile, when section
// is "") of a stripped image whose debug file is missing or unusable: it
// wraps ErrNoDebugFile, ErrNoSection (with a section) and the cause
// (debugfile.ErrNotFound with the paths tried, or the debug file's
// *FormatError).
type noDebugError struct {
	path, section string
	err           error
}

func (e *noDebugError) Error() string {
	msg := e.err.Error()
	if errors.Is(e.err, debugfile.ErrNotFound) {
		msg = strings.TrimPrefix(msg, "debugfile: ")
	} else {
		msg = "its debug file is not usable: " + msg
	}
	if e.section == "" {
		return fmt.Sprintf("elfimage: %s: the image is stripped, and %s", e.path, msg)
	}
	return fmt.Sprintf("elfimage: %s: no section %s: the image is stripped, and %s", e.path, e.section, msg)
}

func (e *noDebugError) Is(target error) bool {
	return target == ErrNoDebugFile || (target == ErrNoSection && e.section != "")
}

func (e *noDebugError) Unwrap() error { return e.err }

func (im *Image) debugFileState() *debugFileState {
	st := &im.dbg().dbgFile
	st.once.Do(func() {
		st.err = errIndexFault
		secs, err := im.Sections()
		if err != nil {
			st.err = err
			return
		}
		for i := range secs {
			if secs[i].Name == ".debug_info" && secs[i].Type != elf.SHT_NOBITS && secs[i].Size > 0 {
				st.own, st.err = true, nil
				return
			}
		}
		st.err = im.openDebugFile(st, secs)
	})
	return st
}

// openDebugFile finds, maps and checks the debug file of the stripped
// image.
func (im *Image) openDebugFile(st *debugFileState, secs []SectionHeader) error {
	t := debugfile.Target{Path: im.path, BuildID: im.buildID}
	for i := range secs {
		if secs[i].Name == debugfile.SectionDebugLink && secs[i].Type != elf.SHT_NOBITS {
			s := &secs[i]
			l, err := debugfile.ParseDebuglink(im.data[s.Offset:s.Offset+s.Size], le)
			if err != nil {
				return objError(im.path, err)
			}
			t.Link = &l
			break
		}
	}
	path, err := im.debugFiles.Find(context.Background(), t)
	if err != nil {
		return err
	}
	mem, err := mapDebugFile(path)
	if err != nil {
		return err
	}
	f, secsD, err := parseSectionTable(path, mem)
	if err == nil {
		err = checkDebugBuildID(path, f, im.buildID)
	}
	if err != nil {
		unix.Munmap(mem)
		return err
	}
	st.path, st.mem, st.secs = path, mem, secsD
	return nil
}

// mapDebugFile maps the file at path read-only.
func mapDebugFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() < ehdrSize {
		return nil, &FormatError{Source: path, Field: "file", Msg: fmt.Sprintf("not a regular file of at least %d bytes", ehdrSize)}
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return mem, nil
}

// checkDebugBuildID checks that the debug file f has the image's build
// ID (when the image has one).
func checkDebugBuildID(path string, f *elfobj.File, want []byte) error {
	if len(want) == 0 {
		return nil
	}
	id, err := f.BuildID()
	if err != nil {
		return objError(path, err)
	}
	if !bytes.Equal(id, want) {
		return &FormatError{Source: path, Field: "NT_GNU_BUILD_ID", Msg: fmt.Sprintf("build ID %s, the image's is %s: not its debug file", hex.EncodeToString(id), hex.EncodeToString(want))}
	}
	return nil
}

// closeDebugFile unmaps the debug file, when one was mapped; called
// when the image is unmapped.
func (im *Image) closeDebugFile() {
	d := im.debug.Load()
	if d == nil {
		return // never queried: no debug file
	}
	if st := &d.dbgFile; st.mem != nil {
		unix.Munmap(st.mem)
		st.mem = nil
	}
}
