package arch

import (
	"os"
	"runtime"
	"testing"
)

// TestHost: Host is the running program's ABI, the shared value when the
// kernel's pages are the ABI's size, a copy with the kernel's page size
// when they are larger (qemu-aarch64 -p 16384 runs this case; the CLI's
// TestRunPageSizeAArch64 runs it end to end), and the same pointer on
// every call.
func TestHost(t *testing.T) {
	h, abi := Host(), ForGOARCH(runtime.GOARCH)
	if abi == nil {
		abi = X86_64
	}
	ps := uint64(os.Getpagesize())
	switch {
	case h.Machine != abi.Machine || h.Name != abi.Name:
		t.Errorf("Host() is %s, want %s", h.Name, abi.Name)
	case ps <= abi.PageSize && h != abi:
		t.Errorf("Host() is a copy on a kernel of %d-byte pages, want %s itself", ps, abi.Name)
	case ps > abi.PageSize && (h == abi || h.PageSize != ps || abi.PageSize == ps):
		t.Errorf("Host().PageSize %d on a kernel of %d-byte pages (ABI value %d)", h.PageSize, ps, abi.PageSize)
	}
	if Host() != h {
		t.Error("Host() returns another pointer on a second call")
	}
}
