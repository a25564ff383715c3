package ccache_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/elfimage/elfimage/ccache"
	"github.com/elfimage/elfimage/lang/scheme"
)

// A runtime loading a source file through the cache: the first load
// compiles and stores the image, the second maps the stored one.
func ExampleCache_Load() {
	dir, err := os.MkdirTemp("", "ccache-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "prog.scm")
	os.WriteFile(src, []byte("(define (main) (display 42))\n"), 0o644)

	c, err := ccache.Open(filepath.Join(dir, "cache")) // in a program: ccache.Env().Dir
	if err != nil {
		log.Fatal(err)
	}
	c.Warn = func(msg string) { fmt.Fprintln(os.Stderr, "warning:", msg) }
	for range 2 {
		r, err := c.Load(ccache.Source{Path: src, Compile: scheme.Compile}, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(filepath.Base(filepath.Dir(r.Path)), r.Hit, r.Image.Mapped())
		r.Close()
	}
	// Output:
	// cache false true
	// cache true true
}
