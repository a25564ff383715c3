// Command cprog blocks one goroutine in a C call made through cgo, for
// procview's tests: cprog_block prints "ready" and calls pause(2), so a
// debugger attached after "ready" finds the thread in libc's pause, called
// by cprog_block, called by cgo's wrapper, called from Go.
package main

/*
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) void cprog_block(void) {
	printf("ready\n");
	fflush(stdout);
	pause();
	printf("unreachable\n");
}
*/
import "C"

func main() {
	C.cprog_block()
}
