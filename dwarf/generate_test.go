package dwarf

import (
	"bytes"
	"os"
	"testing"

	"github.com/elfimage/elfimage/dwarf/internal/constgen"
)

// TestGeneratedConstants regenerates constants.go from constants.txt in
// memory and fails when the file in the tree differs: after editing the
// table, run go generate ./dwarf.
func TestGeneratedConstants(t *testing.T) {
	src, err := os.ReadFile("constants.txt")
	if err != nil {
		t.Fatal(err)
	}
	want, err := constgen.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("constants.go")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; ; i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) || i >= len(g) || i >= len(w) {
			t.Fatalf("constants.go is stale; run go generate ./dwarf. First difference, line %d:\n  constants.go: %s\n  generated:    %s", i+1, gl, wl)
		}
	}
}
