package main

import "unsafe"

// unixAddr returns the address of the first byte of an mmap'd slice.
func unixAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
