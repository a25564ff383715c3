package main

import (
	"io"
	"os"
	"testing"
)

// BenchmarkFramesInterp: dump -frames-interp of a large system library
// (libLLVM, else libclang-cpp, else libstdc++), written to io.Discard.
// bench/run has the row against readelf.
func BenchmarkFramesInterp(b *testing.B) {
	var path string
	for _, p := range []string{
		"/usr/lib/x86_64-linux-gnu/libLLVM.so.19.1",
		"/usr/lib/x86_64-linux-gnu/libclang-cpp.so.19.1",
		"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	} {
		if _, err := os.Stat(p); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		b.Skip("no large system library")
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := dumpFramesInterp(io.Discard, path); err != nil {
			b.Fatal(err)
		}
	}
}
