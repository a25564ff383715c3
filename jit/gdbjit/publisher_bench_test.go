//go:build linux && amd64

package gdbjit

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestGDBRegistrationBench measures registration at scale under a real
// `gdb -batch` (BENCHMARKS.md, "gdb registration"). It runs only with
// ELFIMAGE_GDB_BENCH=1 (it takes about a minute):
//
//	ELFIMAGE_GDB_BENCH=1 go test -run GDBRegistrationBench -v ./jit/gdbjit
//
// (a) 10,000 procedures in one symbol file, then a breakpoint in one of
// them and a completed `bt`: wall time from before the symbol file is
// built to the end of gdb's bt output. (b) 10,000 procedures published one
// at a time through a Publisher, at several paces of the JIT, against the
// naive scheme (one symbol file per procedure, capped by
// ELFIMAGE_GDB_BENCH_NAIVE, default 5,000): cumulative procedures/s at
// each checkpoint, from the first Add to the moment the checkpoint's
// procedure is visible to gdb (its notification returned), and the
// largest latency from Add to visible.
func TestGDBRegistrationBench(t *testing.T) {
	if os.Getenv("ELFIMAGE_GDB_BENCH") == "" {
		t.Skip("set ELFIMAGE_GDB_BENCH=1 to run the gdb registration benchmarks")
	}
	gdb := tooltest.Require(t, "gdb")
	prog := buildPubProg(t)
	defer func(d time.Duration) { gdbTimeout = d }(gdbTimeout)
	gdbTimeout = 10 * time.Minute
	naiveN := 5000
	if s := os.Getenv("ELFIMAGE_GDB_BENCH_NAIVE"); s != "" {
		naiveN, _ = strconv.Atoi(s)
	}

	// (a)
	b, all := gdbRun(t, gdb, []string{prog}, []string{
		"python import time",
		"break jit_5000",
		"run batch 10000",
		"bt",
		`python print("result t1 %d" % time.time_ns())`,
		"delete",
		"continue",
	})
	if t.Failed() {
		return
	}
	t0 := resultInt(t, all, "t0")
	reg := resultInt(t, all, "registered")
	t1 := resultInt(t, all, "t1")
	if !strings.Contains(b[3], "#0  jit_5000 () at /jit/gdbjit/pubprog.src:5001") || !strings.Contains(b[3], "native.trampoline") {
		t.Errorf("bt:\n%s", b[3])
	}
	t.Logf("(a) 10,000 procedures in one symbol file: registered after %.1f ms, bt complete after %.1f ms",
		float64(reg-t0)/1e6, float64(t1-t0)/1e6)

	// (b)
	for _, run := range []string{"publish 10000 0", "publish 10000 100us", "publish 10000 250us", "publish 10000 500us", fmt.Sprintf("naive %d", naiveN)} {
		_, all := gdbRun(t, gdb, []string{prog}, []string{"run " + run})
		if t.Failed() {
			return
		}
		var lines []string
		for _, l := range strings.Split(all, "\n") {
			if r, ok := strings.CutPrefix(l, "result "); ok {
				lines = append(lines, r)
			}
		}
		t.Logf("(b) %s:\n\t%s", run, strings.Join(lines, "\n\t"))
	}
}

func resultInt(t *testing.T, out, key string) int64 {
	t.Helper()
	m := regexp.MustCompile(`result ` + key + ` (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q result in:\n%s", key, out)
	}
	v, _ := strconv.ParseInt(m[1], 10, 64)
	return v
}
