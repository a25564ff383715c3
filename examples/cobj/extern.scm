; Calls out to C and C++ (elfimage build -c; see examples/cobj/throw.cc).
(define-extern (cxx-thrower n))
(define-extern (c-backtrace n))

(define (through n)
  (if (= n 0)
      (+ 1 (cxx-thrower 42))
      (+ 1 (through (- n 1)))))

(define (walk n)
  (if (= n 0)
      (+ 1 (c-backtrace 7))
      (+ 1 (walk (- n 1)))))

(define (fail n)
  (display "failing with ")
  (display n)
  (newline)
  (error "bad value" n (* n 2)))
