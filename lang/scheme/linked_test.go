package scheme

import (
	"debug/dwarf"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/tooltest"
)

func init() { runners["linked"] = linkedRunner }

// linkImage compiles src, links it to a file in a temporary directory and
// opens it; the image is closed when the test ends.
func linkImage(t testing.TB, name string, src []byte) (*elfimage.Image, string) {
	t.Helper()
	m, err := Compile(name, src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), strings.TrimSuffix(name, ".scm")+".elf")
	if err := elfimage.WriteFile(path, m, elfimage.LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	img, err := elfimage.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { img.Close() })
	return img, path
}

func linkedRunner(t testing.TB, src string, opts RunOptions) (*Result, error) {
	img, _ := linkImage(t, "prog.scm", []byte(src))
	return Run(img, opts)
}

// TestLinkedDemo runs the demo through Link → WriteFile → Open → Run and
// checks the captured frames against the image's DWARF as read by Go's
// debug/dwarf: every captured return address (minus one) maps to the
// source position of the (backtrace) call.
func TestLinkedDemo(t *testing.T) {
	img, path := linkImage(t, DemoFile, DemoSource)
	var res *Result
	var err error
	out := captureOutput(t, func(w *os.File) { res, err = Run(img, RunOptions{Stdout: w}) })
	if err != nil {
		t.Fatal(err)
	}
	if out != DemoOutput {
		t.Errorf("demo printed %q", out)
	}
	if len(res.Captures) != 1 {
		t.Fatalf("%d captures", len(res.Captures))
	}
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	d, err := ef.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	pc := res.Captures[0].PC() - uint64(img.Base()) - 1
	r := d.Reader()
	cu, err := r.SeekPC(pc)
	if err != nil {
		t.Fatalf("SeekPC(%#x): %v", pc, err)
	}
	lr, err := d.LineReader(cu)
	if err != nil {
		t.Fatal(err)
	}
	var le dwarf.LineEntry
	if err := lr.SeekPC(pc, &le); err != nil {
		t.Fatal(err)
	}
	if filepath.Base(le.File.Name) != DemoFile || le.Line != 33 || le.Column != 37 {
		t.Errorf("capture pc maps to %s:%d:%d, want demo.scm:33:37", le.File.Name, le.Line, le.Column)
	}
	// The subprogram containing pc is inner, with parameters a and b.
	r = d.Reader()
	var names []string
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == dwarf.TagSubprogram {
			if n, _ := e.Val(dwarf.AttrName).(string); n != "" {
				names = append(names, n)
			}
		}
	}
	for _, want := range []string{"fib", "tak", "ack", "sum-to", "inner", "middle", "outer", "main"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("no subprogram %s in %v", want, names)
		}
	}
}

// TestLinkedTools runs readelf and llvm-dwarfdump --verify on the linked
// demo image.
func TestLinkedTools(t *testing.T) {
	_, path := linkImage(t, DemoFile, DemoSource)
	readelf := tooltest.Require(t, "readelf")
	out, err := exec.Command(readelf, "--debug-dump=frames-interp", path).CombinedOutput()
	cfa := "rbp+16"
	if arch.Host().Machine == arch.AArch64.Machine {
		cfa = "x29+16"
	}
	if err != nil || !strings.Contains(string(out), cfa) {
		t.Errorf("readelf frames: %v\n%s", err, out)
	}
	dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	out, err = exec.Command(dd, "--verify", path).CombinedOutput()
	if err != nil {
		t.Errorf("llvm-dwarfdump --verify: %v\n%s", err, out)
	}
	// The scopes program: optional parameters, nested lexical blocks and
	// location lists.
	_, path = linkImage(t, "scopes.scm", mustRead(t, "testdata/scopes.scm"))
	out, err = exec.Command(dd, "--verify", path).CombinedOutput()
	if err != nil {
		t.Errorf("llvm-dwarfdump --verify scopes.scm: %v\n%s", err, out)
	}
}
