/* Recursion, function pointers and stats with inlining across levels. */
#include "util.h"

static inline long leaf_value(int depth, int i)
{
	return (long)depth * 31 + i;
}

static inline long combine(long a, long b)
{
	return a * 3 + b;
}

static long node(int depth, int width)
{
	if (depth == 0)
		return leaf_value(depth, width);
	long s = 0;
	for (int i = 0; i < width; i++)
		s = combine(s, node(depth - 1, width) + leaf_value(depth, i));
	return s;
}

long tree_sum(int depth, int width)
{
	return node(clamp(depth, 0, 12), clamp(width, 1, 4));
}

static inline double sq(double x)
{
	return x * x;
}

double stats_mean(const double *v, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += v[i];
	return n ? s / n : 0;
}

double stats_var(const double *v, int n)
{
	double m = stats_mean(v, n), s = 0;
	for (int i = 0; i < n; i++)
		s += sq(v[i] - m);
	return n > 1 ? s / (n - 1) : 0;
}

typedef long (*op_fn)(long, long);

static long op_add(long a, long b) { return a + b; }
static long op_mul(long a, long b) { return a * b; }
static long op_sub(long a, long b) { return a - b; }

static op_fn ops[] = { op_add, op_mul, op_sub };

long apply_ops(const long *v, int n)
{
	long acc = 0;
	for (int i = 0; i < n; i++)
		acc = ops[i % 3](acc, v[i]);
	return acc;
}
