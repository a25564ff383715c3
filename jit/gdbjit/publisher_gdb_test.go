//go:build linux && amd64

package gdbjit

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

var (
	pubOnce sync.Once
	pubPath string
	pubErr  error
)

// buildPubProg builds testdata/pubprog once per test run (into the
// directory of buildProg's program, removed by TestMain) and returns its
// path.
func buildPubProg(t *testing.T) string {
	t.Helper()
	goCmd := tooltest.Require(t, "go")
	buildProg(t) // makes progDir
	pubOnce.Do(func() {
		pubPath, pubErr = buildTestdataProg(goCmd, "pubprog")
	})
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	return pubPath
}

// TestGDBPublisher runs testdata/pubprog under gdb: a breakpoint on
// pub_b, set before the code exists (pending), fires after the Publisher
// published it on its own timer; gdb knows pub_b once, with its line;
// after Remove and Flush, `info symbol` of the removed pub_c's address
// finds nothing while its neighbours are still known.
func TestGDBPublisher(t *testing.T) {
	gdb := tooltest.Require(t, "gdb")
	prog := buildPubProg(t)
	cmds := []string{
		0:  "break pub_b",
		1:  "break main.afterRemove",
		2:  "run pending",
		3:  "info symbol $pc",
		4:  "info line pub_d",
		5:  "continue",
		6:  "set language c", // for the casts below (the frame is Go's)
		7:  "info symbol (long)&pub_a + 32",
		8:  "info line pub_c",
		9:  "info symbol (long)&pub_a + 48",
		10: "info symbol (long)&pub_a + 16",
		11: "delete",
		12: "continue",
	}
	b, all := gdbRun(t, gdb, []string{prog}, cmds)
	if t.Failed() {
		return
	}
	m := regexp.MustCompile(`pubprog: code at (0x[0-9a-f]+)`).FindStringSubmatch(all)
	if m == nil {
		t.Fatalf("program did not print its code address:\n%s", all)
	}
	base, _ := strconv.ParseUint(m[1][2:], 16, 64)
	mustContain(t, "break pub_b", b[0], "Breakpoint 1 (pub_b) pending.")
	mustContain(t, "run", b[2], "hit Breakpoint 1, pub_b () at /jit/gdbjit/pubprog.src:2")
	mustContain(t, "info symbol $pc", b[3], "pub_b in section .text")
	if strings.Count(b[3], "in section") != 1 {
		t.Errorf("info symbol $pc: pub_b is known more than once:\n%s", b[3])
	}
	mustContain(t, "info line pub_d", b[4], fmt.Sprintf(`Line 4 of "/jit/gdbjit/pubprog.src" starts at address %#x <pub_d>`, base+48))
	mustContain(t, "continue", b[5], "pubprog: pub_b returned 1")
	mustContain(t, "continue", b[5], "main.afterRemove")
	mustContain(t, "info symbol pub_c (removed)", b[7], "No symbol matches (long)&pub_a + 32.")
	mustContain(t, "info line pub_c (removed)", b[8], `Function "pub_c" not defined.`)
	mustContain(t, "info symbol pub_d (kept)", b[9], "pub_d in section .text")
	mustContain(t, "info symbol pub_b (kept)", b[10], "pub_b in section .text")
	mustContain(t, "last continue", b[12], "pubprog: done")
	if t.Failed() {
		t.Logf("gdb output:\n%s", all)
	}
}
