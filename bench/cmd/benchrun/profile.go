package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage/internal/spinprog"
	"github.com/google/pprof/profile"
)

// profProg is package spinprog's program with work called on 100_000_000.
var profProg = spinprog.Source(100_000_000)

// profileSection measures `elfimage run -cpuprofile` (package selfprof)
// against the unprofiled run of the same image, interleaved round by
// round, at 100 Hz, 1 kHz and 10 kHz, and compares its per-procedure
// shares with those of `perf record -F 1000` of the unprofiled run.
func profileSection(cfg *config, t *toolset) (section, error) {
	s := section{
		title: "Self-profiling (selfprof)",
		intro: "`elfimage run -cpuprofile FILE -cpuprofile-rate HZ prog.elf` (package `selfprof`: perf_event_open cpu-clock, per-CPU inherited events, " +
			"8 KiB user-stack copy per sample, CFI unwinding of the image frames, pprof output) against `elfimage run prog.elf` unprofiled, on a program " +
			"that spends about a second in two Scheme loops (one third, two thirds). Slowdown is the profiled run's CPU time (user + system of the whole process, " +
			"the profiler's reader thread and the profile's writing included) over the unprofiled run's, and its wall time likewise; samples and lost are those of the " +
			"profile's own count (lost: records the kernel dropped because a ring was full). For scale, each round also runs " +
			"`perf record -e cpu-clock -F HZ -g` of the unprofiled program at the same rate: its CPU slowdown (perf's own process included), and agreement, the largest difference " +
			"in points between our share of a procedure and `perf report --no-children --sort sym`'s in the same round, over every procedure perf puts above 5% " +
			"(at 100 Hz a one-second run has about 100 samples, so each share carries a sampling error of about 5 points).",
		header: []string{"rate", "CPU slowdown", "wall slowdown", "perf record -g: CPU slowdown", "samples", "lost", "max difference with perf (points)", "reproduce"},
	}
	rates := []int{100, 1000, 10000}
	var ids []string
	for _, r := range rates {
		ids = append(ids, fmt.Sprintf("profile/hz=%d", r))
	}
	if !cfg.wantAny(ids...) {
		return s, nil
	}
	if t.goCmd == "" {
		return s, fmt.Errorf("go not found")
	}
	dir := filepath.Join(cfg.work, "profile")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return s, err
	}
	cli := filepath.Join(dir, "elfimage")
	if _, err := command(cfg.root, t.goCmd, "build", "-o", cli, "./cmd/elfimage"); err != nil {
		return s, err
	}
	src := filepath.Join(dir, "prog.scm")
	img := filepath.Join(dir, "prog.elf")
	if err := os.WriteFile(src, []byte(profProg), 0o644); err != nil {
		return s, err
	}
	if _, err := command(dir, cli, "build", "-o", img, src); err != nil {
		return s, err
	}
	perf, _ := exec.LookPath("perf")
	var perfShares map[string]float64 // of the last perf run, for the note
	reps := cfg.reps
	base := struct{ wall, cpu []float64 }{}
	type res struct {
		wall, cpu     []float64
		perfCPU       []float64
		samples, lost []float64
		agree         []float64
	}
	out := make([]res, len(rates))
	for round := range reps {
		logf("profile: round %d of %d", round+1, reps)
		w, c, err := timeCommand(cli, "run", img)
		if err != nil {
			return s, err
		}
		base.wall, base.cpu = append(base.wall, w), append(base.cpu, c)
		for i, r := range rates {
			if !cfg.want(ids[i]) {
				continue
			}
			prof := filepath.Join(dir, fmt.Sprintf("cpu-%d.pb.gz", r))
			w, c, err := timeCommand(cli, "run", "-cpuprofile", prof, "-cpuprofile-rate", strconv.Itoa(r), img)
			if err != nil {
				return s, err
			}
			o := &out[i]
			o.wall, o.cpu = append(o.wall, w), append(o.cpu, c)
			shares, samples, lost, err := readProfile(prof)
			if err != nil {
				return s, err
			}
			o.samples, o.lost = append(o.samples, samples), append(o.lost, lost)
			if perf != "" {
				data := filepath.Join(dir, "rate.data")
				if _, c, err := timeCommand(perf, "record", "-e", "cpu-clock", "-F", strconv.Itoa(r), "-g", "-N", "-q", "-o", data, "--", cli, "run", img); err == nil {
					o.perfCPU = append(o.perfCPU, c)
					if ps, err := perfReport(dir, perf, data); err == nil {
						worst := 0.0
						for name, p := range ps {
							if p > 5 {
								worst = math.Max(worst, math.Abs(shares[name]-p))
							}
						}
						o.agree = append(o.agree, worst)
						perfShares = ps
					} else {
						logf("profile: %v", err)
					}
				}
			}
		}
	}
	bw, _ := summarize(base.wall)
	bc, _ := summarize(base.cpu)
	for i, r := range rates {
		if !cfg.want(ids[i]) {
			continue
		}
		o := out[i]
		cw, okw := summarize(o.wall)
		cc, okc := summarize(o.cpu)
		sm, oks := summarize(o.samples)
		ls, okl := summarize(o.lost)
		ag, oka := summarize(o.agree)
		pc, okp := summarize(o.perfCPU)
		pct := func(st stat, ok bool, b float64) string {
			if !ok || b <= 0 {
				return "n/a"
			}
			return fmt.Sprintf("%+.1f%% (%+.1f–%+.1f)", 100*(st.med/b-1), 100*(st.min/b-1), 100*(st.max/b-1))
		}
		agree := "n/a (no perf)"
		if oka {
			agree = cell(ag, true, 1)
		}
		s.rows = append(s.rows, []string{fmt.Sprintf("%d Hz", r), pct(cc, okc, bc.med), pct(cw, okw, bw.med), pct(pc, okp, bc.med),
			cell(sm, oks, 1), cell(ls, okl, 1), agree, fmt.Sprintf("`bench/run --only '%s$'`", ids[i])})
	}
	s.notes = append(s.notes, fmt.Sprintf("Unprofiled run: %s s CPU, %s s wall (median of %d). perf report's shares in the last round: %s.", num(bc.med), num(bw.med), reps, fmtShares(perfShares)))
	return s, nil
}

// readProfile returns the flat share in percent of each function (the
// innermost line of each sample's first location), and the samples and
// lost counts of selfprof's comment.
func readProfile(path string) (shares map[string]float64, samples, lost float64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	shares = map[string]float64{}
	var total int64
	for _, sm := range p.Sample {
		total += sm.Value[0]
		if len(sm.Location) > 0 && len(sm.Location[0].Line) > 0 {
			shares[sm.Location[0].Line[0].Function.Name] += float64(sm.Value[0])
		}
	}
	for k := range shares {
		shares[k] *= 100 / float64(max(total, 1))
	}
	for _, c := range p.Comments {
		var n, l int64
		if _, err := fmt.Sscanf(c, "selfprof: %d samples, %d lost", &n, &l); err == nil {
			samples, lost = float64(n), float64(l)
		}
	}
	return shares, samples, lost, nil
}

// perfReport returns perf report's share in percent of each symbol of
// the user-space samples ("[.]" rows) of data.
func perfReport(dir, perf, data string) (map[string]float64, error) {
	rep, err := command(dir, perf, "report", "-i", data, "--stdio", "--no-children", "--sort", "sym")
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, r := range regexp.MustCompile(`(?m)^\s+([\d.]+)%\s+\[\.\]\s+(\S+)\s*$`).FindAllStringSubmatch(rep, -1) {
		v, _ := strconv.ParseFloat(r[1], 64)
		m[r[2]] += v
	}
	return m, nil
}

func fmtShares(m map[string]float64) string {
	if m == nil {
		return "n/a"
	}
	var parts []string
	for k, v := range m {
		if v > 5 {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", k, v))
		}
	}
	if len(parts) == 0 {
		return "none above 5%"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
