package selfprof

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/elfimage/elfimage/elfobj"
	"github.com/google/pprof/profile"
)

// build makes the profile: sample types samples/count and cpu/nanoseconds
// (as runtime/pprof's CPU profile), one sample per distinct stack, the
// mapping of the executable first, then one per image and one per other
// mapping a pc fell in (the vDSO), from /proc/self/maps.
func (a *aggregator) build(start, end time.Time, st *Stats) (*profile.Profile, error) {
	period := int64(1e9 / a.opts.Rate)
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        period,
		TimeNanos:     start.UnixNano(),
		DurationNanos: end.Sub(start).Nanoseconds(),
	}
	mode := "user and kernel time"
	if !st.Kernel {
		mode = "user time only"
	}
	p.Comments = append(p.Comments,
		fmt.Sprintf("selfprof: perf_event_open cpu-clock at %d Hz (%s), %d threads, %d CPUs", a.opts.Rate, mode, st.Threads, st.CPUs),
		fmt.Sprintf("selfprof: %d samples, %d lost (ring full), %d without Go callers, %d malformed records, %d of child processes dropped", a.samples, st.Lost, a.unjoined, st.Malformed, a.children),
		fmt.Sprintf("selfprof: reader thread %v of CPU", st.ReaderCPU.Round(time.Microsecond)))

	maps := readMaps()
	exe := exeMapping(maps)
	p.Mapping = append(p.Mapping, exe)
	imgMaps := make([]*profile.Mapping, len(a.imgList))
	for i, im := range a.imgList {
		m := &profile.Mapping{
			ID: uint64(len(p.Mapping) + 1), Start: im.start, Limit: im.limit, File: im.path,
			BuildID: hex.EncodeToString(im.buildID), HasFunctions: true, HasFilenames: true, HasLineNumbers: true,
		}
		imgMaps[i] = m
		p.Mapping = append(p.Mapping, m)
	}
	other := map[int]*profile.Mapping{}

	fns := make([]*profile.Function, len(a.funcList))
	for i, f := range a.funcList {
		fns[i] = &profile.Function{ID: f.id, Name: f.name, SystemName: f.name, Filename: f.file, StartLine: f.startLine}
	}
	p.Function = fns
	locs := make([]*profile.Location, len(a.locList))
	for i, l := range a.locList {
		pl := &profile.Location{ID: l.id, Address: l.addr}
		for _, ln := range l.lines {
			pl.Line = append(pl.Line, profile.Line{Function: fns[ln.fn.id-1], Line: ln.line, Column: ln.column})
		}
		switch {
		case l.im != nil:
			pl.Mapping = imgMaps[a.images[l.im]]
		case l.addr == 0:
		case l.addr >= exe.Start && l.addr < exe.Limit:
			pl.Mapping = exe
		default:
			for j, m := range maps {
				if l.addr >= m.Start && l.addr < m.Limit {
					if other[j] == nil {
						// Symbolized as far as it goes: pprof need not
						// look for the file (or ask the server).
						m.ID = uint64(len(p.Mapping) + 1)
						m.HasFunctions = true
						other[j] = m
						p.Mapping = append(p.Mapping, m)
					}
					pl.Mapping = other[j]
					break
				}
			}
		}
		locs[i] = pl
	}
	p.Location = locs
	for _, s := range a.order {
		ps := &profile.Sample{Value: []int64{s.count, s.count * period}}
		for _, l := range s.locs {
			ps.Location = append(ps.Location, locs[l.id-1])
		}
		p.Sample = append(p.Sample, ps)
	}
	if err := p.CheckValid(); err != nil {
		return nil, fmt.Errorf("selfprof: building the profile: %w", err)
	}
	return p, nil
}

// readMaps reads the executable mappings of /proc/self/maps.
func readMaps() []*profile.Mapping {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []*profile.Mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || !strings.Contains(fields[1], "x") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		limit, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(fields[2], 16, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		m := &profile.Mapping{Start: start, Limit: limit, Offset: off}
		if len(fields) >= 6 {
			m.File = strings.Join(fields[5:], " ")
		}
		out = append(out, m)
	}
	return out
}

// exeMapping is the mapping of the executable's text, with its build ID
// and the functions, files and lines the profile gives it (Go's own
// tables, through runtime.CallersFrames). Mapping ID 1, as pprof expects
// of the main binary.
func exeMapping(maps []*profile.Mapping) *profile.Mapping {
	exe, _ := os.Executable()
	m := &profile.Mapping{ID: 1, File: exe, HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	for _, mm := range maps {
		if mm.File == exe {
			m.Start, m.Limit, m.Offset = mm.Start, mm.Limit, mm.Offset
			break
		}
	}
	if f, err := elfobj.Open(exe); err == nil {
		if id, err := f.BuildID(); err == nil && id != nil {
			m.BuildID = hex.EncodeToString(id)
		}
		f.Close()
	}
	return m
}
