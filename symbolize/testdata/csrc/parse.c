/* A small tokenizer and number parser; static helpers get inlined. */
#include "util.h"

static inline int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n';
}

static inline int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static inline int digit_value(char c)
{
	return is_digit(c) ? c - '0' : -1;
}

static inline const char *skip_space(const char *s)
{
	while (is_space(*s))
		s++;
	return s;
}

int parse_number(const char *s, long *out)
{
	long v = 0;
	int neg = 0, n = 0;
	s = skip_space(s);
	if (*s == '-') {
		neg = 1;
		s++;
	}
	for (; digit_value(*s) >= 0; s++, n++)
		v = v * 10 + digit_value(*s);
	*out = neg ? -v : v;
	return n;
}

int tokenize(const char *s, int *starts, int max)
{
	int k = 0;
	const char *p = s;
	while (*p && k < max) {
		p = skip_space(p);
		if (!*p)
			break;
		starts[k++] = (int)(p - s);
		while (*p && !is_space(*p))
			p++;
	}
	return k;
}
