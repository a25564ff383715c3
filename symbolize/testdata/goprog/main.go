// Command goprog is a small Go program built by the symbolize tests to
// compare our answers with llvm-symbolizer's on a Go binary with DWARF.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

type point struct{ x, y int }

func (p point) dist2() int { return p.x*p.x + p.y*p.y }

func square(x int) int { return x * x }

func sumSquares(v []int) int {
	s := 0
	for _, x := range v {
		s += square(x)
	}
	return s
}

//go:noinline
func byDist(ps []point) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].dist2() < ps[j].dist2() })
}

func words(s string) map[string]int {
	m := map[string]int{}
	for _, w := range strings.Fields(s) {
		m[strings.ToLower(w)]++
	}
	return m
}

func main() {
	ps := []point{{3, 4}, {1, 1}, {0, 2}}
	byDist(ps)
	fmt.Println(sumSquares([]int{1, 2, 3, len(os.Args)}), ps, len(words("a b A c")))
}
