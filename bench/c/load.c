// load times loading and unloading one shared object or image file, for
// bench/run's Load rows.
//
// Usage: load MODE FILE ITERS REPS
//   MODE dlopen: dlopen(FILE, RTLD_NOW | RTLD_LOCAL) + dlclose.
//   MODE floor:  open + mmap(whole file, PROT_READ, MAP_PRIVATE) +
//                mprotect of each PT_LOAD segment to its flags (R+X text,
//                R+W data; read-only segments keep the mapping's PROT_READ) +
//                munmap + close: the system calls any one-mmap loader makes.
//                The file size and program headers are read once, before
//                timing.
//   MODE faults: floor plus the page faults a loader that reads its headers
//                in place and applies relocations takes: read the first
//                byte of the mapping (the ELF header) and write one byte of
//                each writable segment (after its mprotect).
//   MODE limit:  what a relocating one-mmap loader cannot do without:
//                open + fstat (the size to map) + pread of the file's first
//                4 KiB (ELF and program headers, .dynamic, relocations) +
//                mmap + mprotect of each PT_LOAD segment + a write of one
//                byte of each writable segment (its copy-on-write fault,
//                where the relocations go) + munmap + close. The file is
//                mapped one page above an anchor, a PROT_NONE page at a
//                page-table boundary (2 MiB with 4 KiB pages) kept for the
//                whole run, as elfimage.Open does (place.go), so that the
//                fault finds the page-table pages of the previous round.
//   MODE cow:    floor plus the write of one byte of each writable segment
//                alone (no read fault, no fstat, no pread).
// One untimed round warms the page cache and the dynamic linker, then REPS
// rounds of ITERS iterations each print one line: "ns/op=X cpu=Y", the
// mean wall time of the round (clock_gettime(CLOCK_MONOTONIC)) and its mean
// CPU time, user plus system (CLOCK_PROCESS_CPUTIME_ID), in ns.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double cpunow(void) {
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

struct seg {
	size_t off, len;
	int prot;
};

static const char *file;
static size_t size;
static struct seg segs[16];
static int nsegs;

static void readHeaders(void) {
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		perror(file);
		exit(1);
	}
	size = st.st_size;
	Elf64_Ehdr eh;
	if (pread(fd, &eh, sizeof eh, 0) != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
		fprintf(stderr, "load: %s: not ELF\n", file);
		exit(1);
	}
	long page = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < eh.e_phnum && nsegs < 16; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof ph, eh.e_phoff + (off_t)i * eh.e_phentsize) != sizeof ph) {
			fprintf(stderr, "load: %s: short program header\n", file);
			exit(1);
		}
		if (ph.p_type != PT_LOAD || !(ph.p_flags & (PF_X | PF_W)) || ph.p_memsz == 0)
			continue;
		size_t start = ph.p_vaddr & ~(size_t)(page - 1);
		size_t end = (ph.p_vaddr + ph.p_memsz + page - 1) & ~(size_t)(page - 1);
		segs[nsegs].off = start;
		segs[nsegs].len = end - start;
		segs[nsegs].prot = PROT_READ | (ph.p_flags & PF_X ? PROT_EXEC : 0) | (ph.p_flags & PF_W ? PROT_WRITE : 0);
		nsegs++;
	}
	close(fd);
}

static int touch, rdfault, hdr;
static char *hint; // where limit maps the file, above its anchor (NULL: anywhere)

// makeAnchor reserves room for the file above a page-table boundary, keeps
// the boundary's first page as the anchor and sets hint one page above it.
static void makeAnchor(void) {
	long page = sysconf(_SC_PAGESIZE);
	size_t span = (size_t)page * (size_t)(page / 8);
	size_t n = (size + page - 1) & ~(size_t)(page - 1), resv = n + span;
	char *r = mmap(NULL, resv, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return;
	char *a = (char *)(((size_t)r + span - 1) & ~(span - 1));
	if (a > r)
		munmap(r, a - r);
	munmap(a + page, r + resv - (a + page));
	hint = a + page;
}
static volatile char sinkc;
static char head[4096];

static void floorOnce(void) {
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(file);
		exit(1);
	}
	if (hdr) {
		struct stat st;
		size_t n = size < sizeof head ? size : sizeof head;
		if (fstat(fd, &st) != 0 || (size_t)st.st_size != size || pread(fd, head, n, 0) != (ssize_t)n) {
			perror("fstat/pread");
			exit(1);
		}
		sinkc += head[0];
	}
	char *p = mmap(hint, size, PROT_READ, MAP_PRIVATE | (hint ? MAP_FIXED_NOREPLACE : 0), fd, 0);
	if (p == MAP_FAILED && hint) {
		hint = NULL; // something else is mapped there now
		p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	}
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	for (int i = 0; i < nsegs; i++)
		if (mprotect(p + segs[i].off, segs[i].len, segs[i].prot) != 0) {
			perror("mprotect");
			exit(1);
		}
	if (touch) {
		if (rdfault)
			sinkc += p[0];
		for (int i = 0; i < nsegs; i++)
			if (segs[i].prot & PROT_WRITE)
				((volatile char *)p)[segs[i].off] = (char)i; // volatile: a store the compiler may not drop
	}
	munmap(p, size);
	close(fd);
}

static void dlopenOnce(void) {
	void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "load: %s\n", dlerror());
		exit(1);
	}
	dlclose(h);
}

int main(int argc, char **argv) {
	if (argc != 5) {
		fprintf(stderr, "usage: load dlopen|floor|faults|limit|cow FILE ITERS REPS\n");
		return 2;
	}
	file = argv[2];
	long iters = atol(argv[3]), reps = atol(argv[4]);
	void (*once)(void);
	if (strcmp(argv[1], "dlopen") == 0) {
		once = dlopenOnce;
	} else if (strcmp(argv[1], "floor") == 0 || strcmp(argv[1], "faults") == 0 || strcmp(argv[1], "limit") == 0 || strcmp(argv[1], "cow") == 0) {
		touch = strcmp(argv[1], "floor") != 0;
		rdfault = strcmp(argv[1], "faults") == 0;
		hdr = strcmp(argv[1], "limit") == 0;
		readHeaders();
		if (hdr)
			makeAnchor();
		once = floorOnce;
	} else {
		fprintf(stderr, "load: unknown mode %s\n", argv[1]);
		return 2;
	}
	if (iters < 1 || reps < 1) {
		fprintf(stderr, "load: bad ITERS or REPS\n");
		return 2;
	}
	for (long i = 0; i < iters; i++)
		once();
	for (long r = 0; r < reps; r++) {
		double t0 = now(), c0 = cpunow();
		for (long i = 0; i < iters; i++)
			once();
		double t1 = now(), c1 = cpunow();
		printf("ns/op=%.1f cpu=%.1f\n", (t1 - t0) / iters, (c1 - c0) / iters);
	}
	return 0;
}
