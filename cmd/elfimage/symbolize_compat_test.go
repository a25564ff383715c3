package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// compatSrc is a C++ program whose -O2 build inlines template members
// and standard library code several levels deep, and has a .cold clone.
const compatSrc = `#include <vector>
#include <map>
#include <string>
#include <cstdio>
namespace ns {
template <typename T> struct Box { T v; T get() const { return v * 2; } };
template <typename T> static inline T twice(const Box<T>& b) { return b.get() + 1; }
__attribute__((noinline)) int work(int n) {
  std::vector<int> xs;
  for (int i = 0; i < n; i++) xs.push_back(twice(Box<int>{i}));
  int s = 0; for (int x : xs) s += x;
  return s;
}
__attribute__((noinline)) std::string name(int k) {
  std::map<int, std::string> m{{1, "one"}, {2, "two"}};
  auto it = m.find(k);
  return it == m.end() ? std::string("none") : it->second;
}
}
int main(int argc, char** argv) {
  printf("%d %s\n", ns::work(argc * 10), ns::name(argc).c_str());
  return 0;
}
`

// discriminator is what addr2line appends to a line whose row has a
// discriminator; package symbolize does not report discriminators.
var discriminator = regexp.MustCompile(` \(discriminator \d+\)`)

// TestSymbolizeCompat runs addr2line and llvm-symbolizer with the same
// flags as symbolize on the same addresses, of a g++ -O2 -g program with
// inlined templates and of /bin/ls, and compares the outputs exactly.
// Deliberate differences, each checked on its own: addr2line's
// " (discriminator N)" is removed from its output before comparing;
// llvm-symbolizer answers an address past every section with the last
// symbol (_end) where symbolize answers addr2line's "?? ??:0"; the JSON
// fields StartAddress, StartFileName, StartLine and Discriminator are
// llvm-symbolizer's "unknown" values ("", "", 0, 0) in ours.
func TestSymbolizeCompat(t *testing.T) {
	gxx := tooltest.Require(t, "g++")
	a2l := tooltest.Require(t, "addr2line")
	llvm := tooltest.Require(t, "llvm-symbolizer")
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "t.cc"), filepath.Join(dir, "t")
	writeSource(t, src, compatSrc)
	if out, err := exec.Command(gxx, "-O2", "-g", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	// Addresses of the clones gcc splits off (f.cold, f.part.0) are
	// compared with llvm-symbolizer only: for their outermost frame both
	// name the clone's symbol (_ZN2ns4workEi.cold) where addr2line gives
	// the DWARF name of the function it was split from.
	var addrs, clones []string
	syms := funcSymbols(t, bin)
	sort.Slice(syms, func(i, j int) bool { return syms[i].Value < syms[j].Value })
	for _, s := range syms {
		for o := uint64(0); o < s.Size; o += 5 {
			if strings.Contains(s.Name, ".") {
				clones = append(clones, fmt.Sprintf("%#x", s.Value+o))
			} else {
				addrs = append(addrs, fmt.Sprintf("%#x", s.Value+o))
			}
		}
	}
	if len(clones) == 0 {
		t.Error("g++ split off no .cold clone")
	}
	past := "0x7fff0000"
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			t.Fatalf("%s %q: %v", name, args, err)
		}
		return string(out)
	}
	ours := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"symbolize"}, args...)...)
		if code != 0 {
			t.Fatalf("symbolize %q: exit %d: %s", args, code, errOut)
		}
		return out
	}
	inlined := 0
	for _, file := range []string{bin, "/bin/ls"} {
		as := addrs
		if file == "/bin/ls" {
			as = []string{"0x46b0", "0x61d0", "0x6200", "0x19750", "0x1a000", "0x4000"}
		}
		// addr2line: its defaults with --addr2line, then its flags.
		for _, flags := range [][]string{nil, {"-f"}, {"-f", "-i"}, {"-f", "-i", "-C"}, {"-a"}, {"-a", "-p", "-C", "-s", "-f", "-i"},
			{"-p", "-i"}, {"-fiCpa"}, {"-s", "-f", "-C"}, {"--demangle", "--functions", "--inlines", "--addresses", "--pretty-print", "--basenames"}} {
			args := append(append([]string{}, flags...), "-e", file)
			want := discriminator.ReplaceAllString(run(a2l, append(args, append(as, past)...)...), "")
			got := ours(append(append([]string{"--addr2line"}, args...), append(as, past)...)...)
			diffLines(t, fmt.Sprintf("addr2line %s on %s", strings.Join(flags, " "), filepath.Base(file)), got, want)
			if len(flags) == 2 && flags[1] == "-i" {
				inlined += strings.Count(got, "\n") - 2*len(as) - 2
			}
		}
		if file == bin {
			as = append(append([]string{}, addrs...), clones...)
		}
		// llvm-symbolizer: its defaults with --output-style=LLVM.
		for _, flags := range [][]string{nil, {"-a"}, {"-p"}, {"-a", "-p"}, {"-s"}, {"--no-inlines"}, {"--functions=none"},
			{"--no-demangle"}, {"-C", "-p", "-s", "-a"}, {"--print-address", "--pretty-print", "--basenames", "--inlining"}} {
			args := append(append([]string{}, flags...), "--obj="+file)
			want := run(llvm, append(args, as...)...)
			if !slices.Contains(flags, "--no-demangle") {
				want = demangleLeft(t, want)
			}
			got := ours(append(append([]string{"--output-style=LLVM"}, args...), as...)...)
			diffLines(t, fmt.Sprintf("llvm-symbolizer %s on %s", strings.Join(flags, " "), filepath.Base(file)), got, want)
		}
		// JSON: the same document but for the fields symbolize leaves
		// unknown, the same field names.
		for _, flags := range [][]string{nil, {"--no-inlines"}, {"--no-demangle"}} {
			args := append(append([]string{"--output-style=JSON"}, flags...), "--obj="+file)
			want := run(llvm, append(args, as...)...)
			if !slices.Contains(flags, "--no-demangle") {
				want = demangleLeft(t, want)
			}
			got := ours(append(args, as...)...)
			compareJSON(t, strings.Join(args, " "), got, want)
		}
	}
	if inlined == 0 {
		t.Error("no inlined frames in the C++ program's answers")
	}
	// Past every section: addr2line's answer, in every style.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", "-e", bin, past}, "??\n??:0\n"},
		{[]string{"-a", "-p", "-f", "-e", bin, past}, "0x000000007fff0000: ?? ??:0\n"},
		{[]string{"--output-style=LLVM", "-e", bin, past}, "??\n??:0:0\n\n"},
	} {
		if got := ours(c.args...); got != c.want {
			t.Errorf("symbolize %q = %q, want %q", c.args, got, c.want)
		}
	}
}

// mangled is an Itanium C++ name left mangled, without a clone suffix.
var mangled = regexp.MustCompile(`\b_Z[A-Za-z0-9_]+\b`)

// demangleLeft demangles with c++filt the names llvm-symbolizer 14's
// demangler leaves mangled (it gives up on some template argument
// expressions, such as enable_if<is_same<...>::value>, that c++filt and
// package demangle read): the one place where symbolize's names are
// deliberately not llvm-symbolizer's.
func demangleLeft(t *testing.T, text string) string {
	t.Helper()
	filt := tooltest.Require(t, "c++filt")
	return mangled.ReplaceAllStringFunc(text, func(m string) string {
		out, err := exec.Command(filt, m).Output()
		if err != nil {
			t.Fatalf("c++filt %s: %v", m, err)
		}
		return strings.TrimSuffix(string(out), "\n")
	})
}

// diffLines reports the first lines where got and want differ.
func diffLines(t *testing.T, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	n := 0
	for i := 0; i < max(len(g), len(w)) && n < 2; i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			t.Errorf("%s, line %d:\n ours   %.300q\n theirs %.300q", what, i+1, a, b)
			n++
		}
	}
	if n == 0 {
		t.Errorf("%s: outputs differ", what)
	}
}

// compareJSON compares symbolize's --output-style=JSON with
// llvm-symbolizer's: the array, every answer's Address and ModuleName,
// every frame's field names and the fields symbolize knows.
func compareJSON(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w []map[string]any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: ours is not a JSON array: %v\n%s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if len(g) != len(w) {
		t.Fatalf("%s: %d answers, llvm-symbolizer %d", what, len(g), len(w))
	}
	keys := func(m map[string]any) string {
		var k []string
		for x := range m {
			k = append(k, x)
		}
		sort.Strings(k)
		return strings.Join(k, ",")
	}
	bad := 0
	for i := range g {
		if keys(g[i]) != keys(w[i]) || g[i]["Address"] != w[i]["Address"] || g[i]["ModuleName"] != w[i]["ModuleName"] {
			t.Errorf("%s: answer %d: %v, llvm-symbolizer %v", what, i, g[i], w[i])
			continue
		}
		gs, _ := g[i]["Symbol"].([]any)
		ws, _ := w[i]["Symbol"].([]any)
		if len(gs) != len(ws) {
			t.Errorf("%s: %v: %d frames, llvm-symbolizer %d", what, g[i]["Address"], len(gs), len(ws))
			continue
		}
		for j := range gs {
			gf, wf := gs[j].(map[string]any), ws[j].(map[string]any)
			if keys(gf) != keys(wf) {
				t.Errorf("%s: fields %s, llvm-symbolizer %s", what, keys(gf), keys(wf))
			}
			for _, k := range []string{"FunctionName", "FileName", "Line", "Column"} {
				if gf[k] != wf[k] && bad < 10 {
					bad++
					t.Errorf("%s: %v frame %d: %s %v, llvm-symbolizer %v", what, g[i]["Address"], j, k, gf[k], wf[k])
				}
			}
		}
	}
}
