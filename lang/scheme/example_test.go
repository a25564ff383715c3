package scheme_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
)

func ExampleCompile() {
	m, err := scheme.Compile("square.scm", []byte(`
(define (square x)
  "Multiply x by itself."
  (* x x))
(define (main) (square 7))`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range m.Procs {
		if !p.Internal {
			fmt.Printf("%s at %d:%d params %d doc %q\n", p.Name, p.Line, p.Column, len(p.Params), p.Doc)
		}
	}
	_, err = scheme.Compile("bad.scm", []byte("(define (main)\n  (+ 1 y))"))
	fmt.Println(err)
	// Output:
	// square at 2:1 params 1 doc "Multiply x by itself."
	// main at 5:1 params 0 doc ""
	// bad.scm:2:8: unbound variable y
}

func ExampleRun() {
	m, err := scheme.Compile("hello.scm", []byte(`
(define (check n) (if (< n 0) (error "negative:" n) n))
(define (main)
  (display "hello ") (display (check 42)) (newline)
  (check -1))`))
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "hello.elf")
	if err := elfimage.WriteFile(path, m, elfimage.LinkOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	img, err := elfimage.Open(path, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer img.Close()
	_, err = scheme.Run(img, scheme.RunOptions{})
	var se *scheme.Error
	if errors.As(err, &se) {
		fmt.Println(se.Message, se.Args, se.Capture.Kind)
	}
	// Output:
	// hello 42
	// negative: [-1] error
}
