/* Sorting and searching with small inlined helpers. */
#include "util.h"

static inline void swap(int *a, int *b)
{
	int t = *a;
	*a = *b;
	*b = t;
}

static inline int median3(int *v, int lo, int hi)
{
	int mid = lo + (hi - lo) / 2;
	if (v[mid] < v[lo])
		swap(&v[mid], &v[lo]);
	if (v[hi] < v[lo])
		swap(&v[hi], &v[lo]);
	if (v[hi] < v[mid])
		swap(&v[hi], &v[mid]);
	return v[mid];
}

static inline void insertion(int *v, int lo, int hi)
{
	for (int i = lo + 1; i <= hi; i++) {
		int x = v[i], j = i - 1;
		while (j >= lo && v[j] > x) {
			v[j + 1] = v[j];
			j--;
		}
		v[j + 1] = x;
	}
}

static void quick(int *v, int lo, int hi, int *steps)
{
	while (hi - lo > 8) {
		int p = median3(v, lo, hi);
		int i = lo, j = hi;
		while (i <= j) {
			while (v[i] < p)
				i++;
			while (v[j] > p)
				j--;
			if (i <= j) {
				swap(&v[i], &v[j]);
				i++;
				j--;
			}
		}
		(*steps)++;
		if (j - lo < hi - i) {
			quick(v, lo, j, steps);
			lo = i;
		} else {
			quick(v, i, hi, steps);
			hi = j;
		}
	}
	insertion(v, lo, hi);
}

int sort_ints(int *v, int n)
{
	int steps = 0;
	if (n > 1)
		quick(v, 0, n - 1, &steps);
	return clamp(steps, 0, 1000);
}

static inline int lower_bound(const int *v, int n, int x)
{
	int lo = 0, hi = n;
	while (lo < hi) {
		int m = lo + (hi - lo) / 2;
		if (v[m] < x)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

int count_range(const int *v, int n, int a, int b)
{
	return lower_bound(v, n, b) - lower_bound(v, n, a);
}
