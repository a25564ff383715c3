package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
)

// framesInputs returns the largest ELF shared object of
// /usr/lib/x86_64-linux-gnu that has an .eh_frame (libLLVM or
// libclang-cpp on a machine with llvm) and, for a second, smaller row,
// libc. With quick only libc.
func framesInputs(quick bool) []string {
	const dir = "/usr/lib/x86_64-linux-gnu"
	var out []string
	if !quick {
		ents, _ := os.ReadDir(dir)
		type cand struct {
			path string
			size int64
		}
		var cs []cand
		for _, e := range ents {
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
				cs = append(cs, cand{filepath.Join(dir, e.Name()), info.Size()})
			}
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].size > cs[j].size })
		for _, c := range cs {
			f, err := elf.Open(c.path)
			if err != nil {
				continue
			}
			ok := f.Section(".eh_frame") != nil
			f.Close()
			if ok {
				out = append(out, c.path)
				break
			}
		}
	}
	if _, err := os.Stat(dir + "/libc.so.6"); err == nil {
		out = append(out, dir+"/libc.so.6")
	}
	return out
}

// framesSection times `elfimage dump -frames-interp FILE` against
// `readelf -W -wN --debug-dump=frames-interp FILE`, whose output ours
// matches byte for byte (checked before timing).
func framesSection(cfg *config, t *toolset) (section, error) {
	s := section{
		title: "CFI dump",
		intro: "`elfimage dump -frames-interp FILE` against `readelf -W -wN --debug-dump=frames-interp FILE` (GNU binutils), " +
			"output to /dev/null, on the largest shared object of /usr/lib/x86_64-linux-gnu with an `.eh_frame` and on libc. " +
			"Both print the same bytes (checked once before timing; the row says so). Wall time of the command, process start included, " +
			"and CPU time (user + system). Seconds.",
		header: []string{"file", "lines printed", "elfimage s", "readelf s", "ours/readelf", "CPU: ours/readelf", "same output", "reproduce"},
	}
	if !cfg.wantAny("frames/largest", "frames/libc") {
		return section{}, nil
	}
	readelf, err := exec.LookPath("readelf")
	if err != nil {
		return s, fmt.Errorf("readelf not found: %v", err)
	}
	cli := filepath.Join(cfg.work, "bin", "elfimage")
	if _, err := command(cfg.root, t.goCmd, "build", "-o", cli, "./cmd/elfimage"); err != nil {
		return s, err
	}
	var worst, largest float64
	for i, path := range framesInputs(cfg.quick) {
		id := "frames/largest"
		if i > 0 || cfg.quick {
			id = "frames/libc"
		}
		if !cfg.want(id) {
			continue
		}
		ours := []string{"dump", "-frames-interp", path}
		theirs := []string{"-W", "-wN", "--debug-dump=frames-interp", path}
		logf("frames: %s", path)
		a, errA := command("", cli, ours...) // also warms the page cache
		b, errB := command("", readelf, theirs...)
		if errA != nil || errB != nil {
			logf("frames: %v %v", errA, errB)
			continue
		}
		same := "yes"
		if sha256.Sum256([]byte(a)) != sha256.Sum256([]byte(b)) {
			same = "**no**"
		}
		rows := bytes.Count([]byte(b), []byte("\n"))
		var wo, wr, co, cr []float64
		for range cfg.reps {
			w1, c1, err1 := timeCommand(cli, ours...)
			w2, c2, err2 := timeCommand(readelf, theirs...)
			if err1 != nil || err2 != nil {
				continue
			}
			wo, co = append(wo, w1), append(co, c1)
			wr, cr = append(wr, w2), append(cr, c2)
		}
		so, okO := summarize(wo)
		sr, okR := summarize(wr)
		sco, _ := summarize(co)
		scr, _ := summarize(cr)
		if okO && okR {
			worst = max(worst, so.med/sr.med)
			if id == "frames/largest" {
				largest = so.med / sr.med
			}
		}
		label := fmt.Sprintf("%s (%s)", filepath.Base(path), mb(fileSize(path)))
		s.rows = append(s.rows, []string{label, group(strconv.Itoa(rows)), cell(so, okO, 1), cell(sr, okR, 1),
			ratio(so.med, sr.med), ratio(sco.med, scr.med), same, fmt.Sprintf("`bench/run --only '%s$'`", id)})
	}
	if worst > 0 {
		s.notes = append(s.notes, fmt.Sprintf("No slower than readelf on every file (ours/readelf ≤ 1 in wall time): %s (worst row %.2f×).", metMissed(worst <= 1), worst))
	}
	if largest > 0 {
		s.withTargets(framesTarget(largest))
	}
	return s, nil
}

// framesTarget decides the CFI dump target of issue 19 from ours/readelf
// in wall time on the largest library.
func framesTarget(largest float64) target {
	return target{"frames/largest", largest <= 1, fmt.Sprintf("%.2f× readelf's time", largest)}
}
