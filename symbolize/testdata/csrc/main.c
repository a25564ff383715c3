/* Driver: calls everything so that nothing is discarded. */
#include <stdio.h>
#include <stdlib.h>
#include "util.h"

uint32_t hash_words(const char **words, int n);
int count_range(const int *v, int n, int a, int b);
long apply_ops(const long *v, int n);

static inline int pick(int argc, int k)
{
	return clamp(argc * 7 + k, 1, 64);
}

int main(int argc, char **argv)
{
	const char *words[] = { "alpha", "beta", "gamma", "delta" };
	int v[64], starts[16];
	double d[16];
	long l[8], num;
	int n = pick(argc, 40);
	for (int i = 0; i < n; i++)
		v[i] = (int)(hash_bytes((const unsigned char *)&i, sizeof i, 1) % 1000);
	for (int i = 0; i < 16; i++)
		d[i] = v[i] / 3.0;
	for (int i = 0; i < 8; i++)
		l[i] = v[i];
	int steps = sort_ints(v, n);
	parse_number(argc > 1 ? argv[1] : " -1234", &num);
	int toks = tokenize("the quick  brown fox", starts, 16);
	printf("%u %d %d %ld %ld %.3f %.3f %ld %d\n", hash_words(words, 4), steps,
	       count_range(v, n, 100, 500), tree_sum(3, 3), num, stats_mean(d, 16),
	       stats_var(d, 16), apply_ops(l, 8), toks);
	return 0;
}
