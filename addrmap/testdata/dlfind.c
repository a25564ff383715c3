// dlfind measures glibc's _dl_find_object (glibc >= 2.35) with N dlopen'ed
// shared objects, for comparison with addrmap.Map.Lookup.
//
// Usage: dlfind DIR N ITERS
// Loads DIR/lib0.so .. DIR/lib{N-1}.so (each defines `int f(int)`), picks
// 4096 addresses at random inside the objects' f (uniform over objects),
// then times ITERS calls of _dl_find_object cycling over them and prints
//   objects=N ns/lookup=X
// Build: gcc -O2 -o dlfind dlfind.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NPCS 4096

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: dlfind DIR N ITERS\n");
		return 2;
	}
	const char *dir = argv[1];
	int n = atoi(argv[2]);
	long iters = atol(argv[3]);
	if (n < 1 || iters < 1) {
		fprintf(stderr, "dlfind: bad N or ITERS\n");
		return 2;
	}
	uintptr_t *fs = calloc(n, sizeof *fs);
	char path[4096];
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/lib%d.so", dir, i);
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "dlfind: %s\n", dlerror());
			return 1;
		}
		void *f = dlsym(h, "f");
		if (!f) {
			fprintf(stderr, "dlfind: %s\n", dlerror());
			return 1;
		}
		fs[i] = (uintptr_t)f;
	}
	static uintptr_t pcs[NPCS];
	srand(n);
	for (int i = 0; i < NPCS; i++)
		pcs[i] = fs[rand() % n] + rand() % 8;
	// Check that every address is found in the right object.
	for (int i = 0; i < NPCS; i++) {
		struct dl_find_object r;
		if (_dl_find_object((void *)pcs[i], &r) != 0 ||
		    pcs[i] < (uintptr_t)r.dlfo_map_start || pcs[i] >= (uintptr_t)r.dlfo_map_end) {
			fprintf(stderr, "dlfind: _dl_find_object(%#lx) failed\n", (unsigned long)pcs[i]);
			return 1;
		}
	}
	uintptr_t sum = 0;
	double t0 = now();
	for (long i = 0; i < iters; i++) {
		struct dl_find_object r;
		_dl_find_object((void *)pcs[i & (NPCS - 1)], &r);
		sum += (uintptr_t)r.dlfo_map_start;
	}
	double t1 = now();
	printf("objects=%d ns/lookup=%.2f (checksum %lu)\n", n, (t1 - t0) / iters, (unsigned long)(sum & 0xff));
	return 0;
}
