package arch

import (
	"os"
	"runtime"
	"sync"
)

// Host returns the ABI of the running program's own code as images linked
// to run in this process need it: [ForGOARCH](runtime.GOARCH), with
// PageSize raised to the running kernel's page size (os.Getpagesize()) when
// that is larger, as on AArch64 kernels built with 16 KiB or 64 KiB pages
// (then a copy of [AArch64]; on every 4 KiB kernel the shared value
// itself). On a GOARCH this package does not know it is [X86_64], whose code
// is written there but never run. Images linked with it load on this
// kernel; to link for any AArch64 kernel, use a copy of [AArch64] with
// PageSize 65536. Cost: computed once; later calls return the same pointer.
func Host() *Arch { return host() }

var host = sync.OnceValue(func() *Arch {
	a := ForGOARCH(runtime.GOARCH)
	if a == nil {
		return X86_64
	}
	if ps := uint64(os.Getpagesize()); ps > a.PageSize {
		c := *a
		c.PageSize = ps
		return &c
	}
	return a
})
