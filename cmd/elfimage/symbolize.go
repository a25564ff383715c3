package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage/symbolize"
)

// runSymbolize is `elfimage symbolize [-e FILE] [-f] [-i] [--json]
// [-columns] [ADDR...]`: addr2line -f -i style answers (or JSON like
// llvm-symbolizer --output-style=JSON) for link-time addresses of any ELF
// file, through package symbolize.
func runSymbolize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("symbolize", stderr)
	exe := fs.String("e", "", "the ELF `file` (required): an image, a gcc/clang or Go binary, a library")
	fs.Bool("f", true, "print function names (always on; accepted for addr2line compatibility)")
	inlines := fs.Bool("i", true, "print inlined frames, innermost first, each as its own function and file:line pair (-i=false: one frame per address)")
	asJSON := fs.Bool("json", false, "print one JSON object per address, like llvm-symbolizer --output-style=JSON")
	columns := fs.Bool("columns", false, "print file:line:column instead of addr2line's file:line")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *exe == "" {
		return fmt.Errorf("%w: -e FILE is required", errUsage)
	}
	sym, err := symbolize.Open(*exe)
	if err != nil {
		return err
	}
	defer sym.Close()
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	p := symPrinter{w: w, sym: sym, file: *exe, inlines: *inlines, json: *asJSON, columns: *columns}
	if fs.NArg() > 0 {
		for _, a := range fs.Args() {
			if err := p.one(a); err != nil {
				return err
			}
		}
	} else {
		// Addresses are answered in batches: whatever input is already
		// waiting (up to batchMax addresses), prepared together so that
		// the units they fall in are indexed in parallel. A batch ends
		// when no more input is buffered, so that a process driving us
		// through pipes gets each answer at once.
		const batchMax = 1 << 14
		in := bufio.NewReaderSize(os.Stdin, 64<<10)
		var batch []string
		var addrs []uint64
		for {
			line, rerr := in.ReadString('\n')
			batch = append(batch, strings.Fields(line)...)
			if in.Buffered() == 0 || len(batch) >= batchMax || rerr != nil {
				addrs = addrs[:0]
				for _, f := range batch {
					if a, ok := parseAddr(f); ok {
						addrs = append(addrs, a)
					}
				}
				if len(addrs) > 1 {
					// Errors show up again, per address, in p.one.
					_ = sym.Prepare(addrs)
				}
				for _, f := range batch {
					if err := p.one(f); err != nil {
						return err
					}
				}
				batch = batch[:0]
				if in.Buffered() == 0 {
					w.Flush()
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return rerr
			}
		}
	}
	if len(p.bad) > 0 {
		return fmt.Errorf("not hexadecimal addresses: %q", p.bad)
	}
	return nil
}

type symPrinter struct {
	w                      *bufio.Writer
	sym                    *symbolize.Symbolizer
	file                   string
	inlines, json, columns bool
	frames                 []symbolize.Frame
	bad                    []string
	num                    []byte // scratch for formatting a frame
}

// parseAddr parses a hexadecimal address, with or without 0x, as
// addr2line does.
func parseAddr(s string) (uint64, bool) {
	a, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), 16, 64)
	return a, err == nil
}

// jsonFrame and jsonAnswer are the JSON output, in llvm-symbolizer's
// field names (plus Inlined).
type jsonFrame struct {
	FunctionName string
	FileName     string
	Line         uint32
	Column       uint32
	Inlined      bool
}

type jsonAnswer struct {
	Address    string
	ModuleName string
	Symbol     []jsonFrame `json:",omitempty"`
	Error      string      `json:",omitempty"`
}

// one answers one address. Like addr2line it answers every address and
// reports the malformed ones at the end; like addr2line it prints "??"
// for an unknown function, "??:0" when nothing is known about the
// address, and "FILE:?" for a known place without a line.
func (p *symPrinter) one(s string) error {
	addr, ok := parseAddr(s)
	if !ok {
		p.bad = append(p.bad, s)
		p.frames = p.frames[:0]
	} else {
		var err error
		p.frames, err = p.sym.Symbolize(addr, p.frames[:0])
		if err != nil && !errors.Is(err, symbolize.ErrNoInfo) {
			return fmt.Errorf("address %#x: %w", addr, err)
		}
	}
	frames := p.frames
	if !p.inlines && len(frames) > 1 {
		frames = frames[:1]
		frames[0].Inlined = false
	}
	if p.json {
		a := jsonAnswer{Address: fmt.Sprintf("%#x", addr), ModuleName: p.file}
		if !ok {
			a.Address, a.Error = s, "not a hexadecimal address"
		} else if len(frames) == 0 {
			a.Symbol = []jsonFrame{{}}
		}
		for _, f := range frames {
			a.Symbol = append(a.Symbol, jsonFrame{f.Function, f.File, f.Line, f.Column, f.Inlined})
		}
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		p.w.Write(b)
		p.w.WriteByte('\n')
		return nil
	}
	if len(frames) == 0 {
		p.w.WriteString("??\n??:0\n")
		return nil
	}
	// name\nfile:line[:column]\n per frame, without fmt (this is the
	// batch loop).
	for _, f := range frames {
		name, file := f.Function, f.File
		if name == "" {
			name = "??"
		}
		if file == "" {
			file = "??"
		}
		b := append(p.num[:0], name...)
		b = append(b, '\n')
		b = append(b, file...)
		b = append(b, ':')
		if f.Line == 0 {
			b = append(b, '?')
		} else {
			b = strconv.AppendUint(b, uint64(f.Line), 10)
			if p.columns && f.Column != 0 {
				b = append(b, ':')
				b = strconv.AppendUint(b, uint64(f.Column), 10)
			}
		}
		p.num = append(b, '\n')
		p.w.Write(p.num)
	}
	return nil
}
