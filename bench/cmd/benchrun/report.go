package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// section is one table of the report with the notes under it.
type section struct {
	title   string
	intro   string     // a paragraph before the table
	header  []string   // column titles
	rows    [][]string // cells, already formatted
	notes   []string   // paragraphs after the table
	targets []target   // the issue 19 targets this section's rows measured
}

// target is one of the targets of issue 19's table, as a run measured
// it: which (an issueTargets key), whether it is met, and the measured
// value that decides it ("worst row 8.5×").
type target struct {
	key string
	met bool
	got string
}

// issueTargets are the targets of issue 19's table, in its order: the
// key a section's target carries and the target in words, as the verdict
// lines and the aggregate line say it.
var issueTargets = []struct{ key, text string }{
	{"load/floor", "load within 1.2× of the floor"},
	{"load/dlopen", "load ≤ 0.6× dlopen at every size"},
	{"load/tail", "load flat (±10%) from 1 MB to 128 MB of tail"},
	{"link/as", "link ≥ 10× GNU `as` in procedures/s"},
	{"symbolize/steady-addr2line", "symbolize steady rate ≥ 5× addr2line's on the gcc binary"},
	{"symbolize/cold-llvm", "symbolize cold rate ≥ 10× llvm-symbolizer's on every file"},
	{"unwind/steps", "unwind ≥ 5 M steps/s with 0 allocations"},
	{"memory/rss", "memory: RSS growth ≤ 1.2× dlopen's"},
	{"frames/largest", "`dump -frames-interp` of the largest system library ≤ 1× readelf's time"},
	{"lookup/dlfind", "addrmap lookup ≤ 0.5× `_dl_find_object` at every object count"},
	{"describe/repeated", "repeated `Procedure(pc)` / `PositionAt(pc)` ≤ 0.1 µs with 0 allocations"},
	{"describe/first-position", "first `PositionAt` ≤ 2× the first-touch floor"},
}

// targetText returns the words of the target with this key.
func targetText(key string) string {
	for _, t := range issueTargets {
		if t.key == key {
			return t.text
		}
	}
	return key
}

// verdict is a target's line under its table: "Target: <text>: **met**
// (<got>)."; several targets of one table share the line.
func verdict(ts []target) string {
	if len(ts) == 0 {
		return ""
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s: %s (%s)", targetText(t.key), metMissed(t.met), t.got)
	}
	if len(ts) == 1 {
		return "Target (issue 19): " + parts[0] + "."
	}
	return "Targets (issue 19): " + strings.Join(parts, "; ") + "."
}

// withTargets adds the targets to s and their verdict line to its notes.
func (s *section) withTargets(ts ...target) {
	if len(ts) == 0 {
		return
	}
	s.targets = append(s.targets, ts...)
	s.notes = append(s.notes, verdict(ts))
}

// targetsLine is the aggregate line at the top of the generated section:
// how many of issue 19's targets the run met, which it missed and which it
// did not measure (a quick or -only run, a missing peer).
func targetsLine(secs []section) string {
	got := map[string]target{}
	for _, s := range secs {
		for _, t := range s.targets {
			got[t.key] = t
		}
	}
	met := 0
	var missed, absent []string
	for _, it := range issueTargets {
		t, ok := got[it.key]
		switch {
		case !ok:
			absent = append(absent, it.text)
		case t.met:
			met++
		default:
			missed = append(missed, fmt.Sprintf("%s (%s)", it.text, t.got))
		}
	}
	line := fmt.Sprintf("**Targets met: %d of %d** (issue 19's table, each decided by its row below)", met, len(got))
	if len(missed) > 0 {
		line += ". Missed: " + strings.Join(missed, "; ")
	}
	if len(absent) > 0 {
		line += fmt.Sprintf(". Not measured in this run (%d of the %d): %s", len(absent), len(issueTargets), strings.Join(absent, "; "))
	}
	return line + "."
}

// stat summarizes the rounds of one measurement.
type stat struct {
	med, min, max float64
	n             int
}

// summarize returns the median, minimum and maximum of xs (the mean of the
// middle two for an even count); ok is false when xs is empty.
func summarize(xs []float64) (s stat, ok bool) {
	if len(xs) == 0 {
		return stat{}, false
	}
	ys := slices.Clone(xs)
	slices.Sort(ys)
	n := len(ys)
	med := ys[n/2]
	if n%2 == 0 {
		med = (ys[n/2-1] + ys[n/2]) / 2
	}
	return stat{med: med, min: ys[0], max: ys[n-1], n: n}, true
}

// num formats x with three significant digits and thousands separators
// for the integer part.
func num(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	ax := math.Abs(x)
	var s string
	switch {
	case ax >= 100:
		s = strconv.FormatFloat(x, 'f', 0, 64)
	case ax >= 10:
		s = strconv.FormatFloat(x, 'f', 1, 64)
	case ax >= 1:
		s = strconv.FormatFloat(x, 'f', 2, 64)
	default:
		s = strconv.FormatFloat(x, 'g', 3, 64)
	}
	// Three significant digits for large numbers too.
	if ax >= 1000 {
		mag := math.Pow(10, math.Floor(math.Log10(ax))-2)
		s = strconv.FormatFloat(math.Round(x/mag)*mag, 'f', 0, 64)
	}
	return group(s)
}

// group inserts commas every three digits of the integer part of s.
func group(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// cell formats a stat as "median (min–max)", scaled by div.
func cell(s stat, ok bool, div float64) string {
	if !ok {
		return "n/a"
	}
	if s.n == 1 {
		return num(s.med / div)
	}
	return fmt.Sprintf("%s (%s–%s)", num(s.med/div), num(s.min/div), num(s.max/div))
}

// ratio formats a/b as "1.23×", or "n/a".
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "n/a"
	}
	r := a / b
	if r >= 10 {
		return fmt.Sprintf("%.0f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// mb formats a byte count in MB (10^6) or KB.
func mb(n int64) string {
	if n >= 1e6 {
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.0f KB", float64(n)/1e3)
}

// machine describes where the run happened.
type machine struct {
	date, cpu, kernel, goVersion, load, loadEnd string
	cores                                       int
	elapsed                                     time.Duration
}

func readMachine() machine {
	m := machine{
		date:      time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		cpu:       "unknown CPU",
		cores:     runtime.NumCPU(),
		goVersion: runtime.Version(),
		load:      loadAvg(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return m
}

// loadAvg returns the 1-, 5- and 15-minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// render writes the generated part of BENCHMARKS.md.
func render(cfg *config, m machine, t *toolset, secs []section) string {
	var b strings.Builder
	mode := "full run"
	if cfg.quick {
		mode = "quick run (`bench/run --quick`: fewer rounds, smaller inputs)"
	}
	if cfg.only != nil {
		mode = fmt.Sprintf("rows matching `%s`", cfg.only)
	}
	fmt.Fprintf(&b, "## Side by side with the peers (generated by `bench/run`)\n\n")
	fmt.Fprintf(&b, "This section is written by `bench/run` (%s); do not edit it by hand, rerun the script.\n\n", mode)
	fmt.Fprintf(&b, "%s\n\n", targetsLine(secs))
	fmt.Fprintf(&b, "- Date: %s; the whole run took %v.\n", m.date, m.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %s, %d cores, %s, %s.\n", m.cpu, m.cores, m.kernel, m.goVersion)
	fmt.Fprintf(&b, "- Load average (1, 5, 15 min) at the start: %s; at the end: %s. ", m.load, m.loadEnd)
	fmt.Fprintf(&b, "With more runnable jobs than cores, absolute times are pessimistic and spreads wide: read the ratios, which compare rounds run interleaved in the same minutes.\n")
	fmt.Fprintf(&b, "- Peers: %s.\n", toolVersions(t))
	fmt.Fprintf(&b, "- Each cell is the median of %d rounds with the spread (min–max) in parentheses. Ratios divide medians. Warm page cache: every file is read once before timing.\n\n", cfg.reps)
	for _, s := range secs {
		fmt.Fprintf(&b, "### %s\n\n", s.title)
		if s.intro != "" {
			fmt.Fprintf(&b, "%s\n\n", s.intro)
		}
		if len(s.rows) > 0 {
			b.WriteString("| " + strings.Join(s.header, " | ") + " |\n|")
			for i := range s.header {
				if i == 0 {
					b.WriteString("---|")
				} else {
					b.WriteString("---:|")
				}
			}
			b.WriteString("\n")
			for _, r := range s.rows {
				b.WriteString("| " + strings.Join(r, " | ") + " |\n")
			}
			b.WriteString("\n")
		}
		for _, n := range s.notes {
			fmt.Fprintf(&b, "%s\n\n", n)
		}
	}
	return b.String()
}

// toolVersions names the peer tools with their versions.
func toolVersions(t *toolset) string {
	var parts []string
	v := func(label, path string, args ...string) {
		if path == "" {
			parts = append(parts, label+" missing")
			return
		}
		out, err := command("", path, args...)
		if err != nil {
			parts = append(parts, label)
			return
		}
		line := strings.TrimSpace(strings.SplitN(strings.TrimSpace(out), "\n", 2)[0])
		parts = append(parts, line)
	}
	v("gcc", t.gcc, "--version")
	v("GNU as", t.as, "--version")
	if t.llvmMC != "" {
		out, _ := command("", t.llvmMC, "--version")
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "LLVM version") {
				parts = append(parts, "llvm-mc/llvm-symbolizer ("+strings.TrimSpace(l)+")")
			}
		}
	}
	if out, err := command("", "ldd", "--version"); err == nil {
		parts = append(parts, strings.TrimSpace(strings.SplitN(out, "\n", 2)[0]))
	}
	return strings.Join(parts, "; ")
}

const (
	beginMarker = "<!-- bench/run:begin -->"
	endMarker   = "<!-- bench/run:end -->"
)

// writeBetweenMarkers replaces the text between beginMarker and endMarker
// in path with text, or inserts the markers and text after the file's
// first heading paragraph when they are absent (creating the file when it
// does not exist).
func writeBetweenMarkers(path, text string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(path, []byte(spliceMarkers(string(old), text)), 0o644)
}

// spliceMarkers returns doc with the generated block replaced by text.
func spliceMarkers(doc, text string) string {
	block := beginMarker + "\n\n" + strings.TrimRight(text, "\n") + "\n\n" + endMarker + "\n"
	if i := strings.Index(doc, beginMarker); i >= 0 {
		if j := strings.Index(doc[i:], endMarker); j >= 0 {
			rest := doc[i+j+len(endMarker):]
			rest = strings.TrimPrefix(rest, "\n")
			return doc[:i] + block + rest
		}
	}
	if doc == "" {
		return "# Benchmarks\n\n" + block
	}
	// After the first heading line and the blank line that follows it.
	if strings.HasPrefix(doc, "#") {
		nl := strings.Index(doc, "\n")
		if nl < 0 {
			return doc + "\n\n" + block
		}
		return doc[:nl+1] + "\n" + block + "\n" + strings.TrimLeft(doc[nl+1:], "\n")
	}
	return block + "\n" + doc
}
