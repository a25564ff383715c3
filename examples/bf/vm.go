package main

import (
	"unsafe"

	"github.com/elfimage/elfimage"
)

// TapeLen is the number of cells of the tape, the classic 30,000.
const TapeLen = 30000

// vm is the state the generated code works on: the parameter vm of the
// compiled procedure, a struct vm * in the debug information. It lives in
// memory from native.Alloc, outside the Go heap, because the code runs
// while the garbage collector may move or free Go memory.
type vm struct {
	// data is the data pointer: the address of the current cell, in cells.
	// The code keeps it in RBX and stores it back here after every move,
	// so it is exact whenever a command starts, and where the program left
	// it when the code returns.
	data uintptr
	// in and out are the file descriptors , reads from and . writes to.
	in, out int32
	// errno is the error number of the read or write that failed, or 0.
	errno int64
	// cells is the tape: 8-bit cells that wrap around.
	cells [TapeLen]byte
}

// Byte offsets of vm's members, shared by the code generator and the
// debug information, so that the two cannot disagree with Go's layout.
const (
	offData  = int32(unsafe.Offsetof(vm{}.data))
	offIn    = int32(unsafe.Offsetof(vm{}.in))
	offOut   = int32(unsafe.Offsetof(vm{}.out))
	offErrno = int32(unsafe.Offsetof(vm{}.errno))
	offCells = int32(unsafe.Offsetof(vm{}.cells))
	vmSize   = int(unsafe.Sizeof(vm{}))
)

// vmType describes vm to debuggers, as C would declare it:
//
//	struct vm {
//		uint8 *data;
//		int32 in, out;
//		int64 errno;
//		uint8 cells[30000];
//	};
func vmType() *elfimage.Type {
	u8 := elfimage.UintType(1)
	return elfimage.StructOf("vm", vmSize,
		elfimage.Member{Name: "data", Offset: int(offData), Type: elfimage.PointerTo(u8)},
		elfimage.Member{Name: "in", Offset: int(offIn), Type: elfimage.IntType(4)},
		elfimage.Member{Name: "out", Offset: int(offOut), Type: elfimage.IntType(4)},
		elfimage.Member{Name: "errno", Offset: int(offErrno), Type: elfimage.IntType(8)},
		elfimage.Member{Name: "cells", Offset: int(offCells), Type: elfimage.ArrayOf(u8, TapeLen)},
	)
}
