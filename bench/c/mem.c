// mem reports the memory a process spends on dlopen'ed shared objects, for
// bench/run's Memory row.
//
// Usage: mem DIR N
// Reads /proc/self/smaps_rollup (twice: the second read is the
// baseline), dlopen(RTLD_NOW | RTLD_LOCAL)s
// DIR/lib0.so .. DIR/lib{N-1}.so, calls one function of each (so that its
// code page is resident, as a runtime's would be), reads smaps_rollup again
// and prints
//   before_rss=B before_private_dirty=B after_rss=B after_private_dirty=B
// in bytes.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void rollup(long *rss, long *dirty) {
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	if (!f) {
		perror("smaps_rollup");
		exit(1);
	}
	char line[256];
	*rss = *dirty = -1;
	while (fgets(line, sizeof line, f)) {
		long kb;
		if (sscanf(line, "Rss: %ld kB", &kb) == 1)
			*rss = kb * 1024;
		else if (sscanf(line, "Private_Dirty: %ld kB", &kb) == 1)
			*dirty = kb * 1024;
	}
	fclose(f);
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: mem DIR N\n");
		return 2;
	}
	int n = atoi(argv[2]);
	long rss0, dirty0, rss1, dirty1;
	char path[4096];
	// The baseline after one read of smaps_rollup: the code and buffers
	// the read itself pages in count as the harness's, not the objects'
	// (benchrun -memproc does the same).
	rollup(&rss0, &dirty0);
	rollup(&rss0, &dirty0);
	long sum = 0;
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/lib%d.so", argv[1], i);
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "mem: %s\n", dlerror());
			return 1;
		}
		long (*f)(long, long) = (long (*)(long, long))dlsym(h, "p0");
		if (!f) {
			fprintf(stderr, "mem: %s\n", dlerror());
			return 1;
		}
		sum += f(i, 1);
	}
	rollup(&rss1, &dirty1);
	printf("before_rss=%ld before_private_dirty=%ld after_rss=%ld after_private_dirty=%ld checksum=%ld\n",
	       rss0, dirty0, rss1, dirty1, sum & 0xff);
	return 0;
}
