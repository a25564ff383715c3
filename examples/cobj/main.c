/* A C program that calls Scheme procedures compiled by
   elfimage build -c fib.scm (see the README, "Ahead-of-time objects for
   the system linker"). */
#include <stdint.h>
#include <stdio.h>

int64_t fib(int64_t);         /* (define (fib n) ...) */
int64_t show_fib(int64_t);    /* (define (show-fib n) ...) */
int64_t even_p(int64_t);      /* (define (even? n) ...) */
int64_t scheme_main(void);    /* (define (main) ...) */

int main(void) {
  printf("fib(20) = %ld\n", (long)fib(20));
  fflush(stdout); /* Scheme's display writes to fd 1 directly */
  show_fib(15);
  printf("even? 4: %ld, even? 7: %ld\n", (long)even_p(4), (long)even_p(7));
  fflush(stdout);
  printf("scheme main: %ld\n", (long)scheme_main());
  return 0;
}
