(define (fib n)
  (if (< n 2)
      n
      (+ (fib (- n 1)) (fib (- n 2)))))

(define (show-fib n)
  (display "fib ")
  (display n)
  (display " = ")
  (display (fib n))
  (newline)
  (fib n))

(define (even? n) (= (remainder n 2) 0))

(define (main) (show-fib 10))
