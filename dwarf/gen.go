//go:build ignore

// Gen writes constants.go from constants.txt: go generate ./dwarf.
package main

import (
	"log"
	"os"

	"github.com/elfimage/elfimage/dwarf/internal/constgen"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("gen: ")
	src, err := os.ReadFile("constants.txt")
	if err != nil {
		log.Fatal(err)
	}
	out, err := constgen.Generate(src)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("constants.go", out, 0o644); err != nil {
		log.Fatal(err)
	}
}
