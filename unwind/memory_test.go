package unwind

import (
	"bufio"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"golang.org/x/sys/unix"
)

// skipEmulatedReadv skips t when err is the ENOSYS of process_vm_readv
// under qemu-user, which does not implement the system call; anywhere
// else it does nothing, and the caller reports err.
func skipEmulatedReadv(t *testing.T, err error) {
	t.Helper()
	if why := qemutest.Emulated(); why != "" && errors.Is(err, unix.ENOSYS) {
		t.Skipf("%s, and qemu-user does not implement process_vm_readv: %v", why, err)
	}
}

// stackAt lays out the stack of testStack in b, which is at address base:
// outer called mid, mid called leaf. It returns leaf's frame.
func stackAt(base uint64, b []byte) Frame {
	put := func(a, v uint64) { binary.LittleEndian.PutUint64(b[a-base:], v) }
	outerSP := base + 0x800
	put(outerSP-8, outer+0x15)
	put(outerSP-16, base+0x900) // outer's rbp
	midRBP := outerSP - 16
	midSP := midRBP - 0x30
	put(midSP-8, mid+0x25)
	var regs Regs
	regs.Set(rsp, midSP-8-24)
	regs.Set(rbp, midRBP)
	return FirstFrame(arch.X86_64, leaf+8, regs)
}

// TestMemories walks the same stack through each Memory: a snapshot copy,
// the live memory of this process (with and without bounds), and this
// process's memory read with process_vm_readv.
func TestMemories(t *testing.T) {
	src := testSource(t)
	// A native stack: mmap'd memory outside the Go heap, which does not
	// move (a Go slice could live on the goroutine stack, which does).
	buf, err := unix.Mmap(-1, 0, 0x1000, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	base := uint64(uintptr(unsafe.Pointer(&buf[0])))
	start := stackAt(base, buf)
	snap := &Snapshot{Base: base, Data: append([]byte(nil), buf...)}
	mems := []struct {
		name string
		mem  Memory
	}{
		{"snapshot", snap},
		{"local", &Local{}},
		{"local-bounded", &Local{Lo: base, Hi: base + uint64(len(buf))}},
		{"remote-self", NewRemote(os.Getpid())},
	}
	want := []uint64{leaf + 8, mid + 0x25, outer + 0x15}
	for _, m := range mems {
		t.Run(m.name, func(t *testing.T) {
			if m.name == "remote-self" {
				if _, err := m.mem.ReadUint64(base); err != nil {
					skipEmulatedReadv(t, err)
				}
			}
			u := New(arch.X86_64, src, m.mem)
			pcs := make([]uint64, 8)
			n, err := u.Walk(start, pcs)
			if err != nil || n != len(want) {
				t.Errorf("%s: %d frames %#x, %v", m.name, n, pcs[:n], err)
				return
			}
			for i := range want {
				if pcs[i] != want[i] {
					t.Errorf("%s: frame %d pc %#x, want %#x", m.name, i, pcs[i], want[i])
				}
			}
			if sm, ok := m.mem.(SizedMemory); ok {
				binary.LittleEndian.PutUint32(buf[0x10:], 0xa1b2c3d4)
				snap.Data[0x10], snap.Data[0x11], snap.Data[0x12], snap.Data[0x13] = 0xd4, 0xc3, 0xb2, 0xa1
				for size, w := range map[int]uint64{1: 0xd4, 2: 0xc3d4, 3: 0xb2c3d4, 4: 0xa1b2c3d4} {
					if v, err := sm.ReadSized(base+0x10, size); err != nil || v != w {
						t.Errorf("%s: ReadSized(%d) = %#x, %v; want %#x", m.name, size, v, err, w)
					}
				}
			}
			if m.name != "local" {
				if _, err := m.mem.ReadUint64(base + uint64(len(buf)) - 4); !errors.Is(err, ErrMemory) && m.name != "remote-self" {
					t.Errorf("%s: read across the end: %v", m.name, err)
				}
			}
			if m.name == "snapshot" {
				if n := testing.AllocsPerRun(100, func() { _, _ = u.Walk(start, pcs) }); n != 0 {
					t.Errorf("snapshot walk: %v allocations", n)
				}
			}
			if m.name == "local-bounded" || m.name == "remote-self" || m.name == "local" {
				if n := testing.AllocsPerRun(100, func() { _, _ = u.Walk(start, pcs) }); n != 0 {
					t.Errorf("%s walk: %v allocations", m.name, n)
				}
			}
		})
	}
	// Unmapped memory is an error, not a crash.
	for _, m := range []Memory{&Local{}, NewRemote(os.Getpid())} {
		if _, err := m.ReadUint64(8); !errors.Is(err, ErrMemory) {
			t.Errorf("%T: read of address 8: %v", m, err)
		}
	}
}

// TestRemoteChild reads another process's memory: the ELF header at the
// start of a child's first mapping. Only a refusal of process_vm_readv
// itself (EPERM, ENOSYS: a seccomp filter or a Yama policy) skips, through
// tooltest (so it fails under CI); any other failure fails.
func TestRemoteChild(t *testing.T) {
	sleep := tooltest.Require(t, "sleep")
	exe, err := filepath.EvalSymlinks(sleep) // /bin/sleep may be a link to a multi-call binary
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sleep, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	var start uint64
	for range 200 { // wait for exec to replace the forked image
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		ok := false
		for sc.Scan() {
			if strings.HasSuffix(sc.Text(), " "+exe) {
				a, _, _ := strings.Cut(sc.Text(), "-")
				start, _ = strconv.ParseUint(a, 16, 64)
				ok = true
				break
			}
		}
		f.Close()
		if ok {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if start == 0 {
		t.Fatalf("no mapping of %s in /proc/%d/maps", exe, pid)
	}
	m := NewRemote(pid)
	v, err := m.ReadSized(start, 4)
	if err != nil {
		skipEmulatedReadv(t, err)
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) {
		tooltest.Skip(t, "process_vm_readv not permitted here: %v", err)
	}
	if err != nil {
		t.Fatalf("reading the child's first mapping at %#x: %v", start, err)
	}
	if v != 0x464c457f {
		t.Fatalf("child's first word %#x, want the ELF magic", v)
	}
}
