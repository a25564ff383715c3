package procview

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/elfimage/elfimage/formaterr"
)

// MaxMappings bounds the lines read from /proc/PID/maps; MaxMapsLine
// bounds one line's length in bytes (a path is at most PATH_MAX, 4096).
const (
	MaxMappings = 1 << 20
	MaxMapsLine = 8192
)

// Mapping is one line of /proc/PID/maps (proc(5)): the run-time range
// [Start, End), permissions ("r-xp"), file offset, device, inode and path
// ("" for an anonymous mapping, "[vdso]", "[stack]" and so on for the
// kernel's pseudo-paths; a deleted file ends in " (deleted)").
type Mapping struct {
	Start, End uint64
	Perms      string
	Offset     uint64
	Major      uint32
	Minor      uint32
	Inode      uint64
	Path       string
}

// Exec reports whether the mapping is executable.
func (m *Mapping) Exec() bool { return len(m.Perms) >= 3 && m.Perms[2] == 'x' }

// ParseMaps parses the contents of a /proc/PID/maps file, at most
// MaxMappings lines of at most MaxMapsLine bytes. Errors are
// *formaterr.Error with Source "maps" and the byte offset of the
// malformed line, or wrap r's error. Cost: O(input).
func ParseMaps(r io.Reader) ([]Mapping, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), MaxMapsLine)
	sc.Split(scanLF)
	var out []Mapping
	var off uint64
	for sc.Scan() {
		line := sc.Bytes()
		if len(out) >= MaxMappings {
			return nil, &formaterr.Error{Source: "maps", Offset: off, Field: "line", Msg: fmt.Sprintf("more than %d mappings", MaxMappings)}
		}
		m, err := parseMapsLine(line)
		if err != nil {
			return nil, &formaterr.Error{Source: "maps", Offset: off, Field: "line", Err: err}
		}
		out = append(out, m)
		off += uint64(len(line)) + 1
	}
	if err := sc.Err(); err != nil {
		return nil, &formaterr.Error{Source: "maps", Offset: off, Field: "line", Err: err}
	}
	return out, nil
}

// scanLF is bufio.ScanLines without its dropping of a "\r" before the
// newline: the kernel ends lines with "\n" alone, and a path may end in
// "\r" (proc(5) escapes only "\n" in paths).
func scanLF(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// parseMapsLine parses "start-end perms offset major:minor inode   path".
func parseMapsLine(line []byte) (m Mapping, err error) {
	field := func() []byte {
		line = bytes.TrimLeft(line, " \t")
		i := bytes.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		f := line[:i]
		line = line[i:]
		return f
	}
	hex := func(b []byte, what string) uint64 {
		if err != nil {
			return 0
		}
		v, e := strconv.ParseUint(string(b), 16, 64)
		if e != nil {
			err = fmt.Errorf("bad %s %q", what, b)
		}
		return v
	}
	rng := field()
	dash := bytes.IndexByte(rng, '-')
	if dash < 0 {
		return m, fmt.Errorf("no address range in %q", rng)
	}
	m.Start, m.End = hex(rng[:dash], "start"), hex(rng[dash+1:], "end")
	m.Perms = string(field())
	m.Offset = hex(field(), "offset")
	dev := field()
	colon := bytes.IndexByte(dev, ':')
	if colon < 0 {
		return m, fmt.Errorf("bad device %q", dev)
	}
	m.Major, m.Minor = uint32(hex(dev[:colon], "device")), uint32(hex(dev[colon+1:], "device"))
	ino := field()
	if err == nil {
		v, e := strconv.ParseUint(string(ino), 10, 64)
		if e != nil {
			err = fmt.Errorf("bad inode %q", ino)
		}
		m.Inode = v
	}
	if err != nil {
		return m, err
	}
	if m.End < m.Start || len(m.Perms) != 4 {
		return m, fmt.Errorf("bad range or permissions %q %q", rng, m.Perms)
	}
	m.Path = string(bytes.TrimLeft(line, " \t"))
	return m, nil
}
