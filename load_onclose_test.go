package elfimage_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
)

// TestOnClose: Close runs the registered functions once, latest first,
// while the image is still mapped, joins their errors into its own, skips
// removed ones, and refuses registrations after it.
func TestOnClose(t *testing.T) {
	m := &elfimage.Module{File: "hooks.s", Procs: []*elfimage.Proc{{Name: "f", Code: []byte{0xc3}}}}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := elfimage.Load("hooks.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64}) // an x86-64 module, never run
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	errHook := errors.New("hook b failed")
	add := func(name string, err error) func() {
		remove, e := im.OnClose(func() error {
			// Still mapped and readable.
			if string(im.Bytes()[:4]) != "\x7fELF" {
				t.Errorf("hook %s: the image is not mapped", name)
			}
			order = append(order, name)
			return err
		})
		if e != nil {
			t.Fatal(e)
		}
		return remove
	}
	add("a", nil)
	add("b", errHook)
	removeC := add("c", nil)
	add("d", nil)
	removeC()
	removeC() // twice: harmless
	err = im.Close()
	if !errors.Is(err, errHook) {
		t.Errorf("Close: %v, want the hook's error joined", err)
	}
	if want := []string{"d", "b", "a"}; !slices.Equal(order, want) {
		t.Errorf("hooks ran %q, want %q (latest first, c removed)", order, want)
	}
	if err := im.Close(); err != nil || len(order) != 3 {
		t.Errorf("second Close: %v, hooks ran %q", err, order)
	}
	if _, err := im.OnClose(func() error { return nil }); !errors.Is(err, elfimage.ErrClosed) {
		t.Errorf("OnClose after Close: %v, want ErrClosed", err)
	}
}
