package tooltest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// GoProgram is a Go program that the tests of a package build once per
// test binary, with go build (a normal binary, with its symbol table and
// DWARF, which debuggers need: go test strips its own), and share. Declare
// one as a package variable; the zero value of the unexported fields is
// ready.
type GoProgram struct {
	Pkg  string   // the package, as go build takes it (relative to the test's directory, or an import path)
	Name string   // the executable's file name
	Env  []string // extra environment entries (KEY=VALUE) for go build, such as CGO_ENABLED=0

	once sync.Once
	path string
	err  error
}

// Path returns the path of the program, built into a new temporary
// directory at the first call (safe for parallel tests). Without go it
// skips t (fails it when CI is set, through [Require]); a failed build
// (its directory removed), or one that takes more than 5 minutes (killed),
// fails t, and every later call of the test binary, with go's output.
// Cost: one go build at the first call (seconds, less with a warm build
// cache).
func (p *GoProgram) Path(t testing.TB) string {
	t.Helper()
	goTool := Require(t, "go")
	p.once.Do(func() {
		dir, err := os.MkdirTemp("", "elfimage-"+p.Name+"-")
		if err != nil {
			p.err = err
			return
		}
		path := filepath.Join(dir, p.Name)
		cmd := exec.Command(goTool, "build", "-o", path, p.Pkg)
		cmd.Env = append(os.Environ(), p.Env...)
		if out, err := RunGroup(cmd, buildTimeout); err != nil {
			os.RemoveAll(dir)
			p.err = fmt.Errorf("go build %s: %v\n%s", p.Pkg, err, out)
			return
		}
		p.path = path
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.path
}

// Remove removes the directory Path built the program into, if it did;
// for TestMain, after m.Run. Errors are ignored.
func (p *GoProgram) Remove() {
	if p.path != "" {
		os.RemoveAll(filepath.Dir(p.path))
	}
}
