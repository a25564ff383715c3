package tooltest

// BogusFPProg is a C program (for GCC) that prints "ready", then runs
// code it copied into anonymous executable memory (no module, no CFI, no
// perf map) that loads the misaligned frame pointer 0xdeadbeef and spins:
// a stack walk of it must stop at its first frame and say why.
const BogusFPProg = `#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

int main(void) {
	/* movabs $0xdeadbeef, %rbp; jmp . */
	static const unsigned char code[] = {0x48, 0xbd, 0xef, 0xbe, 0xad, 0xde, 0, 0, 0, 0, 0xeb, 0xfe};
	void *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	memcpy(p, code, sizeof code);
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	((void (*)(void))p)();
	return 0;
}
`
