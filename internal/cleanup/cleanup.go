// Package cleanup removes a command's temporary files when the command is
// interrupted by SIGINT or SIGTERM, then lets the signal end the process
// as it would have without the handler, so that the caller sees the
// conventional status (130 for SIGINT, 143 for SIGTERM in a shell's $?).
//
// The signal is delivered to a goroutine, so it is handled while another
// goroutine runs native code: image code entered through package native
// runs in a system call from the scheduler's point of view, so its P is
// free for the handler. Paths are registered before the file is created
// (see [TempDir] and [Track]), so no file is left behind between its
// creation and its registration.
package cleanup

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	mu      sync.Mutex
	tracked = map[uint64]string{}
	nextID  uint64
	caught  atomic.Bool
)

// Track registers path (a file or a directory) to be removed, with
// os.RemoveAll, when a signal caught by [Catch] arrives. It returns the
// function that unregisters it, to call once the path is removed or
// renamed away; calling it more than once is harmless. Cost: a map insert
// under a mutex.
func Track(path string) (untrack func()) {
	mu.Lock()
	defer mu.Unlock()
	nextID++
	id := nextID
	tracked[id] = path
	return func() {
		mu.Lock()
		delete(tracked, id)
		mu.Unlock()
	}
}

// Catch installs the handler for SIGINT and SIGTERM: on the first of
// them, every tracked path is removed, the signal's default action is
// restored and the signal is raised again, which ends the process (status
// 128+signal number as a shell reports it). Should the process survive
// that, it exits with status 128+signal number. A signal that was ignored
// when the process started is left ignored. Call it once, early in main;
// later calls do nothing.
func Catch() {
	if !caught.CompareAndSwap(false, true) {
		return
	}
	ch := make(chan os.Signal, 1)
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM} {
		// A signal ignored at start (a shell's background job ignores
		// SIGINT, nohup SIGHUP) stays ignored: catching it would make
		// the process die of what its parent meant it to survive.
		if !signal.Ignored(sig) {
			signal.Notify(ch, sig)
		}
	}
	go func() {
		sig := (<-ch).(syscall.Signal)
		// Hold the lock to the end: a goroutine that creates files
		// blocks in Track rather than creating one we would not remove.
		mu.Lock()
		removeAll()
		signal.Reset(sig)
		syscall.Kill(os.Getpid(), sig)
		time.Sleep(time.Second)
		os.Exit(128 + int(sig))
	}()
}

// removeAll removes every tracked path. The caller holds mu.
func removeAll() {
	for id, p := range tracked {
		os.RemoveAll(p)
		delete(tracked, id)
	}
}

// TempDir creates a new directory, mode 0700, in os.TempDir() named
// prefix-RANDOM, tracked from before its creation, and returns it with the
// function that removes it and unregisters it (idempotent).
func TempDir(prefix string) (dir string, remove func(), err error) {
	for range 100 {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("%s-%08x", prefix, rand.Uint32()))
		untrack := Track(dir)
		err = os.Mkdir(dir, 0o700)
		if err == nil {
			return dir, func() { os.RemoveAll(dir); untrack() }, nil
		}
		untrack()
		if !os.IsExist(err) {
			return "", nil, err
		}
	}
	return "", nil, err
}
