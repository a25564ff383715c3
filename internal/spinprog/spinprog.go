// Package spinprog holds the Scheme program the profiler's tests and
// benchmarks sample: two procedures running the same loop, spin-b for
// twice the iterations of spin-a, both called from work, so that a
// profile of it shows about one third of the time in spin-a and two
// thirds in spin-b, every sample with work and main on the stack.
package spinprog

import "fmt"

// Source returns the program with work called on n: spin-a runs n
// iterations and spin-b 2n, and main prints 13n (3n + 5·2n) and a
// newline. On this machine n = 10⁸ is about a second of CPU.
func Source(n int) string {
	return fmt.Sprintf(`(define (spin-a n acc)
  (if (= n 0)
      acc
      (spin-a (- n 1) (+ acc 3))))
(define (spin-b n acc)
  (if (= n 0)
      acc
      (spin-b (- n 1) (+ acc 5))))
(define (work n)
  (+ (spin-a n 0) (spin-b (* 2 n) 0)))
(define (main)
  (display (work %d))
  (newline))
`, n)
}
