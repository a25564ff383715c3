package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/elfimage/elfimage"
)

// cpuSeconds returns the user plus system CPU time of this process.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// timeLink links m and writes the image to path (os.WriteFile, no fsync:
// the assemblers do not sync either), returning the wall and CPU seconds
// taken (the CPU time of the whole process, garbage collector included)
// and the file size.
func timeLink(m *elfimage.Module, path string) (wall, cpu float64, size int64, err error) {
	runtime.GC()
	c0 := cpuSeconds()
	t0 := time.Now()
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		return 0, 0, 0, err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return 0, 0, 0, err
	}
	return time.Since(t0).Seconds(), cpuSeconds() - c0, int64(len(b)), nil
}

// timeCommand runs a command and returns its wall time, process start
// included, and its CPU time (user plus system), in seconds.
func timeCommand(name string, args ...string) (wall, cpu float64, err error) {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%s: %v\n%s", filepath.Base(name), err, lastLines(stderr.String(), 10))
	}
	wall = time.Since(t0).Seconds()
	return wall, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func linkSection(cfg *config, t *toolset) (section, error) {
	s := section{
		title: "Link and write",
		intro: "`elfimage.Link` + `os.WriteFile` of a module of n procedures (20 bytes of code each: a frame-pointer frame, " +
			"five line rows with columns, four CFI operations, two parameters with register locations; the module is built before timing), " +
			"against GNU `as --gdwarf-5` and `llvm-mc -filetype=obj -dwarf-version=5` assembling the same procedures from a `.s` file " +
			"(same instructions, one `.loc` per line row, `.cfi_startproc`/`.cfi_def_cfa_offset`/`.cfi_offset`/`.cfi_def_cfa_register`/`.cfi_def_cfa`/`.cfi_endproc`, `.file`; " +
			"wall time of the command, process start included). Our output holds more: `.debug_info` with a subprogram and two parameters per procedure, " +
			"`.eh_frame_hdr`, `.symtab`, the procedure table; the assemblers write a line table, CFI and a compile unit without DIEs per procedure. " +
			"Cells: procedures/s of wall time, with MB/s of output and the output size; the last ratios use CPU time (user + system: of the command, or of this process for Link, garbage collection included), which a loaded machine disturbs less.",
		header: []string{"procedures", "elfimage procs/s", "elfimage MB/s (size)", "as procs/s", "as MB/s (size)", "llvm-mc procs/s", "llvm-mc MB/s (size)", "ours/as", "ours/llvm-mc", "by CPU time: ours/as / ours/llvm-mc", "reproduce"},
	}
	sizes := []int{10000, 100000}
	reps := cfg.reps
	if cfg.quick {
		sizes = sizes[:1] // 100,000 procedures take GNU as seconds per round
	}
	dir := filepath.Join(cfg.work, "link")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return s, err
	}
	worst := 0.0
	for _, n := range sizes {
		id := fmt.Sprintf("link/procs=%d", n)
		if !cfg.want(id) {
			continue
		}
		logf("link: %d procedures", n)
		m := linkModule(n)
		asm := filepath.Join(dir, fmt.Sprintf("p%d.s", n))
		if err := os.WriteFile(asm, []byte(asmSource(n)), 0o644); err != nil {
			return s, err
		}
		out := filepath.Join(dir, fmt.Sprintf("p%d.elf", n))
		asOut := filepath.Join(dir, fmt.Sprintf("p%d-as.o", n))
		mcOut := filepath.Join(dir, fmt.Sprintf("p%d-mc.o", n))
		asArgs := []string{"--gdwarf-5", "-o", asOut, asm}
		mcArgs := []string{"-filetype=obj", "-triple=x86_64-pc-linux-gnu", "-dwarf-version=5", "-o", mcOut, asm}
		// Warm: one untimed round of each.
		if _, _, _, err := timeLink(m, out); err != nil {
			return s, err
		}
		haveAs, haveMC := t.as != "", t.llvmMC != ""
		if haveAs {
			if _, _, err := timeCommand(t.as, asArgs...); err != nil {
				logf("link: %v", err)
				haveAs = false
			}
		}
		if haveMC {
			if _, _, err := timeCommand(t.llvmMC, mcArgs...); err != nil {
				logf("link: %v", err)
				haveMC = false
			}
		}
		var ours, as, mc, oursCPU, asCPU, mcCPU []float64
		var size int64
		if n >= 100000 {
			reps = min(reps, 3) // GNU as takes seconds per round
		}
		for range reps {
			wall, cpu, sz, err := timeLink(m, out)
			if err != nil {
				return s, err
			}
			size = sz
			ours, oursCPU = append(ours, float64(n)/wall), append(oursCPU, float64(n)/cpu)
			if haveAs {
				if wall, cpu, err := timeCommand(t.as, asArgs...); err == nil {
					as, asCPU = append(as, float64(n)/wall), append(asCPU, float64(n)/cpu)
				}
			}
			if haveMC {
				if wall, cpu, err := timeCommand(t.llvmMC, mcArgs...); err == nil {
					mc, mcCPU = append(mc, float64(n)/wall), append(mcCPU, float64(n)/cpu)
				}
			}
		}
		oc, _ := summarize(oursCPU)
		ac, okAC := summarize(asCPU)
		mcc, okMC := summarize(mcCPU)
		cpuAs, cpuMC := "n/a", "n/a"
		if okAC {
			cpuAs = ratio(oc.med, ac.med)
		}
		if okMC {
			cpuMC = ratio(oc.med, mcc.med)
		}
		cpuRatios := cpuAs + " / " + cpuMC
		o, ok := summarize(ours)
		a, okA := summarize(as)
		c, okC := summarize(mc)
		mbps := func(st stat, ok bool, bytes int64) string {
			if !ok {
				return "n/a"
			}
			return fmt.Sprintf("%s (%s)", num(st.med*float64(bytes)/float64(n)/1e6), mb(bytes))
		}
		ra, rc := "n/a", "n/a"
		if ok && okA {
			ra = ratio(o.med, a.med)
			if worst == 0 || o.med/a.med < worst {
				worst = o.med / a.med
			}
		}
		if ok && okC {
			rc = ratio(o.med, c.med)
		}
		s.rows = append(s.rows, []string{group(fmt.Sprint(n)), cell(o, ok, 1), mbps(o, ok, size),
			cell(a, okA, 1), mbps(a, okA, fileSize(asOut)), cell(c, okC, 1), mbps(c, okC, fileSize(mcOut)), ra, rc, cpuRatios,
			fmt.Sprintf("`bench/run --only '%s$'`", id)})
		os.Remove(out)
		os.Remove(asOut)
		os.Remove(mcOut)
		os.Remove(asm)
	}
	if worst > 0 {
		s.withTargets(linkTarget(worst))
	}
	if len(s.rows) == 0 {
		return section{}, nil
	}
	return s, nil
}

// linkTarget decides the Link target of issue 19 from the worst ours/as
// ratio of procedures per second over the rows.
func linkTarget(worst float64) target {
	return target{"link/as", worst >= 10, fmt.Sprintf("worst row %.1f×", worst)}
}
