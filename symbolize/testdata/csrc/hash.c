/* Hashing: murmur-style mixing with the helpers of util.h inlined. */
#include "util.h"

static inline uint32_t load32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint32_t tail(const unsigned char *p, size_t n, uint32_t h)
{
	uint32_t k = 0;
	switch (n & 3) {
	case 3:
		k ^= (uint32_t)p[2] << 16;
		/* fall through */
	case 2:
		k ^= (uint32_t)p[1] << 8;
		/* fall through */
	case 1:
		k ^= p[0];
		k *= 0xcc9e2d51u;
		k = rotl32(k, 15);
		k *= 0x1b873593u;
		h ^= k;
	}
	return h;
}

uint32_t hash_bytes(const unsigned char *p, size_t n, uint32_t seed)
{
	uint32_t h = seed;
	size_t i;
	for (i = 0; i + 4 <= n; i += 4)
		h = mix(h, load32(p + i));
	h = tail(p + i, n - i, h);
	return finish(h, n);
}

static uint32_t __attribute__((noinline)) hash_string(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return hash_bytes((const unsigned char *)s, n, 0x9747b28cu);
}

uint32_t hash_words(const char **words, int n)
{
	uint32_t h = 0;
	for (int i = 0; i < n; i++)
		h = mix(h, hash_string(words[i]));
	return finish(h, (size_t)n);
}
