package elfimage

import "testing"

// FuzzRebase feeds Rebase arbitrary bytes: it must return an error or an
// image of the same size, never panic.
func FuzzRebase(f *testing.F) {
	f.Add(buildTestImage())
	m := &Module{File: "f.scm", Procs: []*Proc{{Name: "f", Code: []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3},
		Lines: []LineRow{{Offset: 0, Line: 1, Column: 1}, {Offset: 4, Line: 2, Column: 3}}}}}
	if b, err := Link(m, LinkOptions{}); err == nil {
		f.Add(b)
	} else {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := Rebase(b, 0x7f0000000000)
		if err == nil && len(out) != len(b) {
			t.Fatalf("rebased image is %d bytes, input %d", len(out), len(b))
		}
	})
}
