/* Source of the relocatable objects in this directory (see build.sh):
   functions in several sections, a global, a static, a thread-local
   variable and a string, so that the debug sections and .eh_frame carry
   every kind of relocation compilers emit there. No header is included,
   so that cross compilers need no sysroot. */

int counter = 3;
static int hidden = 7;
__thread int per_thread;
const char *greeting = "hello from reloc.c";

struct pair {
	int key;
	long value;
};

static int twice(int x) { return 2 * x + hidden; }

__attribute__((noinline)) int add(int a, int b) { return a + b + per_thread; }

__attribute__((section(".text.cold"), noinline)) int cold(struct pair *p) {
	return p->key + (int)p->value;
}

int compute(int n) {
	struct pair p = {n, 2L * n};
	int s = 0;
	for (int i = 0; i < n; i++)
		s = add(s, twice(i));
	counter += s;
	return s + cold(&p);
}
