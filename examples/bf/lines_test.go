package main

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"golang.org/x/arch/x86/x86asm"
)

// A pos is a line and column.
type pos struct{ line, col int }

// lineRows reads the image's line table with debug/dwarf (a reader that
// shares nothing with elfimage) and returns its rows, end rows included.
func lineRows(t *testing.T, image []byte) []dwarf.LineEntry {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	r := d.Reader()
	cu, err := r.Next()
	if err != nil || cu == nil {
		t.Fatal("no compile unit", err)
	}
	lr, err := d.LineReader(cu)
	if err != nil {
		t.Fatal(err)
	}
	var rows []dwarf.LineEntry
	for {
		var e dwarf.LineEntry
		if err := lr.Next(&e); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, e)
	}
	return rows
}

// commandPositions returns the position of every command byte of src.
func commandPositions(src []byte) []pos {
	var ps []pos
	line, col := 1, 0
	for _, b := range src {
		col++
		if b == '\n' {
			line, col = line+1, 0
			continue
		}
		if bytes.IndexByte([]byte("+-<>[].,"), b) >= 0 {
			ps = append(ps, pos{line, col})
		}
	}
	return ps
}

// TestLineRows checks the line table of every test program, for both
// architectures, with debug/dwarf: rows start on instruction boundaries
// and cover the whole procedure; the statement rows of the body are at
// commands, in source order, and without folding there is exactly one per
// command; and Image.PositionAt, the runtime's query, agrees with
// debug/dwarf at every instruction (for the running program's
// architecture).
func TestLineRows(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.b")
	srcs := map[string][]byte{"everything.b": []byte(everything)}
	for _, f := range files {
		srcs[filepath.Base(f)], _ = os.ReadFile(f)
	}
	host := arch.ForGOARCH(runtime.GOARCH)
	for name, src := range srcs {
		for _, a := range arches {
			for _, fold := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/fold=%v", name, a.Name, fold), func(t *testing.T) {
					testLineRows(t, name, src, Options{Fold: fold, Arch: a}, a == host)
				})
			}
		}
	}
}

// testLineRows is TestLineRows for one program, architecture and
// folding; load also compares with Image.PositionAt (for the running
// program's architecture, whose images load).
func testLineRows(t *testing.T, name string, src []byte, opts Options, load bool) {
	fold := opts.Fold
	l := link(t, name, src, opts)
	var img *elfimage.Image
	if load {
		var err error
		if img, err = elfimage.Load(name, l.image, nil); err != nil {
			t.Fatal(err)
		}
		defer img.Close()
	}
	rows := lineRows(t, l.image)
	if len(rows) < 3 || rows[0].Address != l.addr || !rows[len(rows)-1].EndSequence ||
		rows[len(rows)-1].Address != l.addr+uint64(len(l.code)) {
		t.Fatalf("rows do not cover the procedure [%#x, %#x): %v", l.addr, l.addr+uint64(len(l.code)), rows)
	}
	rows = rows[:len(rows)-1]

	// Instruction boundaries, and the row at each.
	boundary := map[uint64]bool{}
	k := 0
	for pc := 0; pc < len(l.code); {
		size := 4 // AArch64
		if opts.Arch == arch.X86_64 {
			in, err := x86asm.Decode(l.code[pc:], 64)
			if err != nil {
				t.Fatal(err)
			}
			size = in.Len
		}
		addr := l.addr + uint64(pc)
		boundary[addr] = true
		for k+1 < len(rows) && rows[k+1].Address <= addr {
			k++
		}
		if img != nil {
			got, err := img.PositionAt(addr)
			if err != nil || got.Line != rows[k].Line || got.Column != rows[k].Column {
				t.Errorf("%#x: PositionAt %v (%v), debug/dwarf %d:%d", addr, got, err, rows[k].Line, rows[k].Column)
			}
		}
		pc += size
	}

	cmds := commandPositions(src)
	var stmts []pos
	for i, r := range rows {
		if !boundary[r.Address] {
			t.Errorf("row %d at %#x is inside an instruction", i, r.Address)
		}
		p := pos{r.Line, r.Column}
		if i == 0 {
			if p != (pos{1, 1}) || !r.IsStmt {
				t.Errorf("the prologue's row is %v", p)
			}
			continue
		}
		if !r.IsStmt {
			// A stub: the position of a command that can fail.
			if !slices.Contains(cmds, p) {
				t.Errorf("stub row at %#x: %v is not a command", r.Address, p)
			}
			continue
		}
		stmts = append(stmts, p)
	}
	if len(stmts) == 0 {
		t.Fatal("no statement rows after the prologue")
	}
	// The last statement row is the return, past the program's end.
	body, end := stmts[:len(stmts)-1], stmts[len(stmts)-1]
	if len(cmds) > 0 && !(end.line > cmds[len(cmds)-1].line || end.line == cmds[len(cmds)-1].line && end.col > cmds[len(cmds)-1].col) {
		t.Errorf("the return's row %v is not past the last command %v", end, cmds[len(cmds)-1])
	}
	for i, p := range body {
		if !slices.Contains(cmds, p) {
			t.Errorf("statement row %v is not a command", p)
		}
		if i > 0 && (p.line < body[i-1].line || p.line == body[i-1].line && p.col <= body[i-1].col) {
			t.Errorf("statement rows out of source order: %v after %v", p, body[i-1])
		}
	}
	if !fold && !slices.Equal(body, cmds) {
		t.Errorf("without folding, the statement rows are %v, the commands %v", body, cmds)
	}
	if fold && len(body) >= len(cmds) && name != "cat.b" && name != "rev.b" {
		t.Errorf("folding left %d rows for %d commands", len(body), len(cmds))
	}
}
