// Package dwarf holds what every DWARF format package in elfimage shares: the
// encoding parameters of a unit ([Encoding]), LEB128 and fixed-width
// encoders, a bounds-checked decoding cursor with a sticky first error
// ([Buf]), the [FormatError] every decoder returns, the DWARF 5
// constants in the standard's own spelling, each type with a String method,
// and the form table ([Form.Spec], [Buf.FormValue]) through which every DIE
// reader decodes attribute values. The constants and the form table are
// generated from one source, constants.txt (go generate).
//
// The formats themselves live below: dwarf/info (DIEs and abbrevs),
// dwarf/line (line programs), dwarf/frame (CIE, FDE, CFA programs,
// .eh_frame_hdr) and dwarf/expr (DWARF expressions).
//
// Reference: DWARF Debugging Information Format Version 5 (2017), chapter 7
// "Data Representation".
package dwarf

import (
	"encoding/binary"
	"fmt"

	"github.com/elfimage/elfimage/formaterr"
)

// Format is the DWARF offset format (DWARF 5 section 7.4).
type Format uint8

const (
	// Format32 uses 4-byte section offsets and unit lengths.
	Format32 Format = 4
	// Format64 uses 8-byte section offsets; unit lengths are 0xffffffff
	// followed by an 8-byte length.
	Format64 Format = 8
)

// OffsetSize returns the size in bytes of a section offset in this format.
func (f Format) OffsetSize() int {
	if f == Format64 {
		return 8
	}
	return 4
}

func (f Format) String() string {
	if f == Format64 {
		return "DWARF64"
	}
	return "DWARF32"
}

// Encoding gives the parameters that fix how a unit is encoded: DWARF
// version (2 to 5), offset format, address size in bytes (4 or 8) and byte
// order. Writers take one; readers fill one from each unit header.
type Encoding struct {
	Version   uint16
	Format    Format
	AddrSize  uint8
	ByteOrder binary.ByteOrder
}

// Default64 is the encoding elfimage writes unless told otherwise: DWARF 5,
// 32-bit format, 8-byte addresses, little-endian.
var Default64 = Encoding{Version: 5, Format: Format32, AddrSize: 8, ByteOrder: binary.LittleEndian}

// Validate reports whether e is an encoding elfimage can write or read.
func (e Encoding) Validate() error {
	if e.Version < 2 || e.Version > 5 {
		return fmt.Errorf("dwarf: unsupported version %d", e.Version)
	}
	if e.Format != Format32 && e.Format != Format64 {
		return fmt.Errorf("dwarf: unsupported offset format %d", e.Format)
	}
	if e.AddrSize != 4 && e.AddrSize != 8 {
		return fmt.Errorf("dwarf: unsupported address size %d", e.AddrSize)
	}
	if e.ByteOrder == nil {
		return fmt.Errorf("dwarf: no byte order")
	}
	return nil
}

// FormatError is the error every elfimage decoder returns for malformed
// input, [formaterr.Error] (source, offset, field, message, cause), under
// the name the DWARF decoders have always used: the DWARF decoders set
// Source to the section (".debug_line", ".eh_frame", ...) and Offset to the
// byte offset in it. One errors.As with either name catches the errors of
// every decoder.
type FormatError = formaterr.Error
