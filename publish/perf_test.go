package publish_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/jit/jitdump"
	"github.com/elfimage/elfimage/jit/perfmap"
	"github.com/elfimage/elfimage/publish"
)

// TestPerfMapAndJitdump: PerfMap appends each image's PerfMapEntries to
// the process's perf map and Jitdump writes each image's
// JitdumpFunctions to a new dump, image after image, as perf reads them
// back (the files are parsed by the perfmap and jitdump readers).
func TestPerfMapAndJitdump(t *testing.T) {
	a, b := twoProcs(t), twoProcs(t)
	defer a.Close()
	defer b.Close()
	var wantMap []perfmap.Entry
	var wantDump []jitdump.Function
	for _, im := range []*elfimage.Image{a, b} {
		e, err := publish.PerfMapEntries(im)
		if err != nil {
			t.Fatal(err)
		}
		wantMap = append(wantMap, e...)
		f, err := publish.JitdumpFunctions(im)
		if err != nil {
			t.Fatal(err)
		}
		wantDump = append(wantDump, f...)
	}

	pm, err := perfmap.Default()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(pm.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := publish.PerfMap(a, b); err != nil {
		t.Fatal(err)
	}
	all, err := os.ReadFile(pm.Path())
	if err != nil {
		t.Fatal(err)
	}
	m, err := perfmap.Parse(bytes.NewReader(all[len(before):]))
	if err != nil || m.Skipped != 0 {
		t.Fatalf("perf map: %v, %d lines skipped", err, m.Skipped)
	}
	if len(m.Raw) != len(wantMap) {
		t.Fatalf("%d perf map lines added, want %d", len(m.Raw), len(wantMap))
	}
	for i, e := range m.Raw {
		if e != wantMap[i] {
			t.Errorf("perf map line %d: %+v, want %+v", i, e, wantMap[i])
		}
	}

	w, err := publish.Jitdump(t.TempDir(), a, b)
	if err != nil {
		t.Fatal(err)
	}
	path := w.Path()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := jitdump.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	code := d.Code()
	if len(code) != len(wantDump) {
		t.Fatalf("%d code loads in the dump, want %d", len(code), len(wantDump))
	}
	for i, c := range code {
		f := &wantDump[i]
		if c.Name != f.Name || c.CodeAddr != f.Addr || string(c.Code) != string(f.Code) ||
			(c.DebugInfo != nil) != (len(f.Lines) > 0) || (c.Unwinding != nil) != (f.CFI != nil) {
			t.Errorf("load %d: %s at %#x (%d bytes, debug %v, unwinding %v), want %s at %#x (%d bytes, %d lines, CFI %v)",
				i, c.Name, c.CodeAddr, len(c.Code), c.DebugInfo != nil, c.Unwinding != nil, f.Name, f.Addr, len(f.Code), len(f.Lines), f.CFI != nil)
		}
	}
}
