package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/elfimage/elfimage/jit/jitdump"
	"github.com/elfimage/elfimage/jit/perfmap"
)

// dumpOther prints a file that is not an ELF image: a jitdump file
// (jit-PID.dump) or a perf map (perf-PID.map). It reports whether it
// recognized the file.
func dumpOther(w io.Writer, path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	if len(data) >= 4 {
		m := binary.LittleEndian.Uint32(data)
		if m == jitdump.Magic || m == jitdump.MagicSwapped {
			return true, dumpJitdump(w, data)
		}
	}
	if bytes.HasPrefix(data, []byte("\x7fELF")) {
		return false, nil
	}
	return true, dumpPerfMap(w, data)
}

func dumpJitdump(w io.Writer, data []byte) error {
	d, err := jitdump.Parse(data)
	if d == nil {
		return err
	}
	h := d.Header
	fmt.Fprintf(w, "jitdump version %d, machine %d, pid %d, flags %#x, %d records\n", h.Version, h.Machine, h.PID, uint64(h.Flags), len(d.Records))
	for _, r := range d.Records {
		p := r.RecordPrefix()
		fmt.Fprintf(w, "  @%d %v", p.Timestamp, p.ID)
		switch r := r.(type) {
		case *jitdump.CodeLoad:
			fmt.Fprintf(w, " %s [%#x, %#x) index %d pid %d tid %d\n", r.Name, r.CodeAddr, r.CodeAddr+r.CodeSize, r.CodeIndex, r.PID, r.TID)
		case *jitdump.CodeMove:
			fmt.Fprintf(w, " %#x -> %#x (%d bytes) index %d\n", r.OldCodeAddr, r.NewCodeAddr, r.CodeSize, r.CodeIndex)
		case *jitdump.DebugInfo:
			fmt.Fprintf(w, " for %#x, %d entries\n", r.CodeAddr, len(r.Entries))
			for _, e := range r.Entries {
				fmt.Fprintf(w, "      %#x %s:%d\n", e.Addr, e.File, e.Line)
			}
		case *jitdump.UnwindingInfo:
			fmt.Fprintf(w, " .eh_frame %d bytes, .eh_frame_hdr %d bytes, mapped %d bytes\n", r.UnwindingSize-r.EHFrameHdrSize, r.EHFrameHdrSize, r.MappedSize)
		default:
			fmt.Fprintln(w)
		}
	}
	return err // records before a malformed one are printed, then the error
}

func dumpPerfMap(w io.Writer, data []byte) error {
	m, err := perfmap.Parse(bytes.NewReader(data))
	if err != nil {
		return err
	}
	if len(m.Entries) == 0 && m.Skipped > 0 {
		return fmt.Errorf("not an ELF image, a jitdump file or a perf map (no line parses as a perf map entry; first: %v)", m.FirstSkip)
	}
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	fmt.Fprintf(bw, "perf map: %d entries read, %d after later entries win, %d lines skipped\n", len(m.Raw), len(m.Entries), m.Skipped)
	if m.FirstSkip != nil {
		fmt.Fprintf(bw, "  first skipped: %v\n", m.FirstSkip)
	}
	for _, e := range m.Entries {
		fmt.Fprintf(bw, "  [%#x, %#x) %s\n", e.Start, e.End(), e.Name)
	}
	return nil
}
