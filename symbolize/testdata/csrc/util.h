/* Shared helpers, inlined into every file that includes them. */
#ifndef UTIL_H
#define UTIL_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t rotl32(uint32_t x, int r)
{
	return (x << r) | (x >> (32 - r));
}

static inline uint32_t mix(uint32_t h, uint32_t k)
{
	k *= 0xcc9e2d51u;
	k = rotl32(k, 15);
	k *= 0x1b873593u;
	h ^= k;
	h = rotl32(h, 13);
	return h * 5 + 0xe6546b64u;
}

static inline uint32_t finish(uint32_t h, size_t len)
{
	h ^= (uint32_t)len;
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

static inline int clamp(int v, int lo, int hi)
{
	if (v < lo)
		return lo;
	if (v > hi)
		return hi;
	return v;
}

uint32_t hash_bytes(const unsigned char *p, size_t n, uint32_t seed);
int sort_ints(int *v, int n);
long tree_sum(int depth, int width);
double stats_mean(const double *v, int n);
double stats_var(const double *v, int n);
int parse_number(const char *s, long *out);
int tokenize(const char *s, int *starts, int max);

#endif
