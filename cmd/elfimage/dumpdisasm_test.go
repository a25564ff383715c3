package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// disasmLine is one instruction line of dump -disasm, parsed.
type disasmLine struct {
	addr      uint64
	insn      string // the instruction text
	pos       string // file:line:column, or ""
	cfa       string // the CFA rule, or "" when no FDE covers the address
	regs      map[string]string
	live      map[string]string
	label     string // the label the instruction is under
	rawFields string
}

var disasmRE = regexp.MustCompile(`^  ([0-9a-f]+):\t([0-9a-f ]+?) *\t(.*?) *\t;(.*)$`)

// parseDisasm parses dump -disasm output by address.
func parseDisasm(t *testing.T, out string) (map[uint64]*disasmLine, []uint64) {
	t.Helper()
	lines := map[uint64]*disasmLine{}
	var order []uint64
	label := ""
	labelRE := regexp.MustCompile(`^[0-9a-f]{16} <(.*)>:$`)
	for _, s := range strings.Split(out, "\n") {
		if m := labelRE.FindStringSubmatch(s); m != nil {
			label = m[1]
			continue
		}
		m := disasmRE.FindStringSubmatch(s)
		if m == nil {
			if strings.HasPrefix(s, "  ") {
				t.Fatalf("unparsed line %q", s)
			}
			continue
		}
		addr, _ := strconv.ParseUint(m[1], 16, 64)
		l := &disasmLine{addr: addr, insn: m[3], regs: map[string]string{}, live: map[string]string{}, label: label, rawFields: m[4]}
		rest := m[4]
		if i := strings.Index(rest, "  live "); i >= 0 {
			for _, v := range strings.Fields(rest[i+len("  live "):]) {
				name, loc, _ := strings.Cut(v, "=")
				l.live[name] = loc
			}
			rest = rest[:i]
		}
		if i := strings.Index(rest, "  cfa="); i >= 0 {
			fs := strings.Fields(rest[i:])
			l.cfa = strings.TrimPrefix(fs[0], "cfa=")
			for _, f := range fs[1:] {
				reg, rule, _ := strings.Cut(f, "=")
				if rule != "u" {
					l.regs[reg] = rule
				}
			}
			rest = rest[:i]
		}
		l.pos = strings.TrimSpace(rest)
		if lines[addr] == nil {
			order = append(order, addr)
		}
		lines[addr] = l
	}
	return lines, order
}

// objdumpInsns returns the address and instruction mnemonic (with
// objdump's prefixes, as "cs nopw") of every instruction objdump -d
// prints.
func objdumpInsns(t *testing.T, tool, file string) map[uint64]string {
	t.Helper()
	out, err := exec.Command(tool, "-d", "--no-show-raw-insn", "-l", file).Output()
	if err != nil {
		t.Fatalf("%s -d %s: %v", tool, file, err)
	}
	re := regexp.MustCompile(`^ +([0-9a-f]+):\t(.*)$`)
	insns := map[uint64]string{}
	for _, s := range strings.Split(string(out), "\n") {
		m := re.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		addr, _ := strconv.ParseUint(m[1], 16, 64)
		insns[addr] = mnemonic(m[2])
	}
	return insns
}

// mnemonic is an instruction's prefixes and mnemonic: its words up to the
// first operand.
func mnemonic(insn string) string {
	var ws []string
	for _, w := range strings.Fields(insn) {
		if strings.ContainsAny(w, "%$(,#[") || strings.HasPrefix(w, "0x") || regexp.MustCompile(`^[0-9a-f]+$`).MatchString(w) && len(ws) > 0 ||
			len(ws) > 0 && !isPrefix(ws[len(ws)-1]) {
			break
		}
		ws = append(ws, w)
	}
	return strings.Join(ws, " ")
}

func isPrefix(w string) bool {
	switch w {
	case "cs", "ds", "data16", "rep", "repz", "repnz", "lock", "bnd", "notrack", "addr32":
		return true
	}
	return false
}

// checkAgainstObjdump: every instruction objdump prints, dump -disasm
// prints at the same address with the same mnemonic, and no other.
func checkAgainstObjdump(t *testing.T, tool, file string, ours map[uint64]*disasmLine) {
	t.Helper()
	ref := objdumpInsns(t, tool, file)
	if len(ref) == 0 {
		t.Fatalf("%s printed no instructions", tool)
	}
	bad := 0
	for a, m := range ref {
		l := ours[a]
		switch {
		case l == nil:
			t.Errorf("%#x: %s prints %q, dump -disasm nothing", a, tool, m)
		case mnemonic(l.insn) != m:
			t.Errorf("%#x: %s prints %q, dump -disasm %q", a, tool, m, l.insn)
		default:
			continue
		}
		if bad++; bad > 20 {
			t.Fatal("too many differences")
		}
	}
	for a, l := range ours {
		if _, ok := ref[a]; !ok {
			t.Errorf("%#x: dump -disasm prints %q, %s nothing", a, l.insn, tool)
		}
	}
}

// checkLinesAgainstAddr2line: every instruction's line is addr2line's,
// and addr2line has a line wherever we print one.
func checkLinesAgainstAddr2line(t *testing.T, file string, ours map[uint64]*disasmLine, addrs []uint64) {
	t.Helper()
	addr2line := tooltest.Require(t, "addr2line")
	args := []string{"-e", file}
	for _, a := range addrs {
		args = append(args, strconv.FormatUint(a, 16))
	}
	out, err := exec.Command(addr2line, args...).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(addrs) {
		t.Fatalf("addr2line printed %d lines for %d addresses", len(got), len(addrs))
	}
	withLine := 0
	for i, a := range addrs {
		ref, _, _ := strings.Cut(got[i], " (discriminator")
		refLine := ref[strings.LastIndexByte(ref, ':')+1:]
		p := ours[a].pos
		if refLine == "?" || refLine == "0" {
			if p != "" {
				t.Errorf("%#x: addr2line %q, dump -disasm %q", a, got[i], p)
			}
			continue
		}
		withLine++
		fileLine := p[:max(strings.LastIndexByte(p, ':'), 0)]
		if fileLine != ref {
			t.Errorf("%#x: addr2line %q, dump -disasm %q", a, ref, p)
		}
	}
	if withLine == 0 {
		t.Errorf("no address has a line")
	}
}

// checkCFAAgainstReadelf: at the address of each row of readelf
// --debug-dump=frames-interp, dump -disasm prints the row's CFA rule and
// the same rules for every register column readelf does not print "u".
func checkCFAAgainstReadelf(t *testing.T, file string, ours map[uint64]*disasmLine) {
	t.Helper()
	readelf := tooltest.Require(t, "readelf")
	out, err := exec.Command(readelf, "--debug-dump=frames-interp", file).Output()
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	checked := 0
	rowRE := regexp.MustCompile(`^([0-9a-f]{8,16}) (\S+) +(.*)$`)
	for _, s := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(s, "   LOC") {
			cols = strings.Fields(s)[2:]
			continue
		}
		if strings.Contains(s, " FDE ") || strings.Contains(s, " CIE") {
			if strings.Contains(s, " CIE") {
				cols = nil // a CIE's own row is no instruction's
			}
			continue
		}
		m := rowRE.FindStringSubmatch(s)
		if m == nil || cols == nil {
			continue
		}
		addr, _ := strconv.ParseUint(m[1], 16, 64)
		l := ours[addr]
		if l == nil {
			continue // a row at no instruction we print (padding, another section)
		}
		checked++
		if l.cfa != m[2] {
			t.Errorf("%#x: readelf CFA %s, dump -disasm %q", addr, m[2], l.cfa)
		}
		want := map[string]string{}
		for i, r := range strings.Fields(m[3]) {
			if r != "u" && i < len(cols) {
				want[cols[i]] = r
			}
		}
		for reg, rule := range want {
			if l.regs[reg] != rule {
				t.Errorf("%#x: readelf %s=%s, dump -disasm %v", addr, reg, rule, l.rawFields)
			}
		}
		for reg, rule := range l.regs {
			if _, ok := want[reg]; !ok {
				t.Errorf("%#x: dump -disasm %s=%s, readelf u", addr, reg, rule)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no readelf row at an instruction")
	}
}

const disasmC = `
#include <stdio.h>
#include <stdlib.h>
static int work(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i] * (i ^ 3); return s; }
__attribute__((noinline)) long deep(long x, long y) { long v[8]; for (int i = 0; i < 8; i++) v[i] = x * i + y; if (x > 5) return deep(x - 1, v[x & 7]) + v[3]; return v[1]; }
int main(int argc, char **argv) { int a[64]; for (int i = 0; i < 64; i++) a[i] = argc + i; printf("%d %ld\n", work(a, argc > 1 ? atoi(argv[1]) : 64), deep(argc + 9, 2)); return 0; }
`

// TestDisasmGCC: dump -disasm of a gcc -O2 -g x86-64 program agrees with
// objdump -d (addresses and mnemonics), addr2line (lines) and readelf
// (CFA and register rules); -proc prints one function under its label.
func TestDisasmGCC(t *testing.T) {
	objdump := tooltest.Require(t, "objdump")
	exe := tooltest.GCC(t, disasmC, "-O2", "-g")
	code, out, errOut := runCLI(t, "dump", "-disasm", exe)
	if code != 0 {
		t.Fatal(errOut)
	}
	ours, order := parseDisasm(t, out)
	checkAgainstObjdump(t, objdump, exe, ours)
	checkLinesAgainstAddr2line(t, exe, ours, order)
	checkCFAAgainstReadelf(t, exe, ours)
	for _, a := range order {
		if l := ours[a]; (l.label == "main" || l.label == "deep") && l.pos == "" && !strings.Contains(l.insn, "nop") {
			t.Errorf("%#x in %s: no line: %q", a, l.label, l.rawFields)
		}
	}

	code, out, errOut = runCLI(t, "dump", "-disasm", "-proc", "deep", exe)
	if code != 0 {
		t.Fatal(errOut)
	}
	one, addrs := parseDisasm(t, out)
	if len(addrs) < 5 || !strings.Contains(out, "<deep>:") {
		t.Fatalf("-proc deep:\n%s", out)
	}
	for _, a := range addrs {
		if one[a].label != "deep" || ours[a] == nil || ours[a].insn != one[a].insn {
			t.Errorf("-proc deep prints %#x %q under %q", a, one[a].insn, one[a].label)
		}
	}
	if code, _, errOut := runCLI(t, "dump", "-disasm", "-proc", "nosuch", exe); code == 0 || !strings.Contains(errOut, "nosuch") {
		t.Errorf("-proc nosuch: exit %d, %s", code, errOut)
	}
}

// TestDisasmImage: on an image of ours, the variables dump -disasm
// shows live at each instruction of inner are those describe shows, with
// the same locations, and the lines and CFA are addr2line's and
// readelf's.
func TestDisasmImage(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(errOut)
	}
	img := filepath.Join(dir, "demo.elf")
	code, out, errOut := runCLI(t, "dump", "-disasm", "-proc", "inner", img)
	if code != 0 {
		t.Fatal(errOut)
	}
	ours, addrs := parseDisasm(t, out)
	if len(addrs) < 5 || !strings.Contains(out, "<inner>:") {
		t.Fatalf("-proc inner:\n%s", out)
	}
	args := []string{"describe", img}
	for _, a := range addrs {
		args = append(args, "0x"+strconv.FormatUint(a, 16))
	}
	code, desc, errOut := runCLI(t, args...)
	if code != 0 {
		t.Fatal(errOut)
	}
	liveRE := regexp.MustCompile(`^  live (?:parameter|variable) (\S+) \(.*\) in (.*)$`)
	var cur *disasmLine
	seen := map[uint64]map[string]string{}
	for _, s := range strings.Split(desc, "\n") {
		if a, _, ok := strings.Cut(s, ": "); ok && strings.HasPrefix(a, "0x") {
			v, _ := strconv.ParseUint(a[2:], 16, 64)
			cur = ours[v]
			seen[v] = map[string]string{}
			continue
		}
		if m := liveRE.FindStringSubmatch(s); m != nil && cur != nil {
			seen[cur.addr][m[1]] = m[2]
		}
	}
	withLive := 0
	for _, a := range addrs {
		want, got := seen[a], ours[a].live
		if len(got) > 0 {
			withLive++
		}
		if len(want) != len(got) {
			t.Errorf("%#x: describe live %v, dump -disasm %v", a, want, got)
			continue
		}
		for n, loc := range want {
			if got[n] != loc {
				t.Errorf("%#x: describe %s in %s, dump -disasm %s", a, n, loc, got[n])
			}
		}
	}
	if withLive == 0 {
		t.Errorf("no instruction of inner has a live variable:\n%s", out)
	}
	checkLinesAgainstAddr2line(t, img, ours, addrs)
	checkCFAAgainstReadelf(t, img, ours)
}

// TestDisasmAArch64: dump -disasm of an aarch64-linux-gnu-gcc -O2 -g
// object agrees with aarch64-linux-gnu-objdump -d on addresses and
// mnemonics and with readelf on the CFA rules.
func TestDisasmAArch64(t *testing.T) {
	gcc := tooltest.Require(t, "aarch64-linux-gnu-gcc")
	objdump := tooltest.Require(t, "aarch64-linux-gnu-objdump")
	dir := t.TempDir()
	src := filepath.Join(dir, "a.c")
	obj := filepath.Join(dir, "a.o")
	if err := os.WriteFile(src, []byte(`
static int work(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i] * (i ^ 3); return s; }
__attribute__((noinline)) long deep(long x, long y) { long v[8]; for (int i = 0; i < 8; i++) v[i] = x * i + y; if (x > 5) return deep(x - 1, v[x & 7]) + v[3]; return v[1]; }
int run(int argc) { int a[64]; for (int i = 0; i < 64; i++) a[i] = argc + i; return work(a, argc) + (int)deep(argc + 9, 2); }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-O2", "-g", "-c", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	code, out, errOut := runCLI(t, "dump", "-disasm", obj)
	if code != 0 {
		t.Fatal(errOut)
	}
	ours, addrs := parseDisasm(t, out)
	checkAgainstObjdump(t, objdump, obj, ours)
	checkCFAAgainstReadelf(t, obj, ours)
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	withLine := 0
	for _, a := range addrs {
		if strings.Contains(ours[a].pos, "a.c:") {
			withLine++
		}
	}
	if withLine < len(addrs)/2 {
		t.Errorf("%d of %d instructions have a line in a.c:\n%s", withLine, len(addrs), out)
	}
}

// TestDisasmSystem: on /bin/ls (no DWARF, CET's endbr64 and notrack,
// PLT entries), every instruction's address and mnemonic are objdump's,
// and the CFA rules readelf's.
func TestDisasmSystem(t *testing.T) {
	objdump := tooltest.Require(t, "objdump")
	const file = "/bin/ls"
	if _, err := os.Stat(file); err != nil {
		tooltest.Skip(t, "%v", err)
	}
	code, out, errOut := runCLI(t, "dump", "-disasm", file)
	if code != 0 {
		t.Fatal(errOut)
	}
	ours, _ := parseDisasm(t, out)
	checkAgainstObjdump(t, objdump, file, ours)
	checkCFAAgainstReadelf(t, file, ours)
}
