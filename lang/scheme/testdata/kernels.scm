; Benchmark kernels. The tests (run_test.go) replace main with one call
; per case; this main is what the CFI checks compile.

(define (fib n)
  "Naive doubly recursive Fibonacci."
  (if (< n 2)
      n
      (+ (fib (- n 1)) (fib (- n 2)))))

(define (tak x y z)
  (if (not (< y x))
      z
      (tak (tak (- x 1) y z)
           (tak (- y 1) z x)
           (tak (- z 1) x y))))

(define (ack m n)
  (cond ((= m 0) (+ n 1))
        ((= n 0) (ack (- m 1) 1))
        (else (ack (- m 1) (ack m (- n 1))))))

(define (sum-to n)
  (let loop ((i 1) (acc 0))
    (if (> i n)
        acc
        (loop (+ i 1) (+ acc i)))))

(define (my-even? n) (if (= n 0) #t (my-odd? (- n 1))))
(define (my-odd? n) (if (= n 0) #f (my-even? (- n 1))))

(define (count-up n)
  (let ((i 0) (s 0))
    (let loop ()
      (when (< i n)
        (set! s (+ s i))
        (set! i (+ i 1))
        (loop)))
    s))

(define (arith a b)
  (let* ((q (quotient a b))
         (r (remainder a b))
         (m (modulo a b)))
    (+ (* q 10000) (* r 100) m)))

(define (logic a b)
  (+ (if (and a b) 1 0)
     (if (or a b) 10 0)
     (if (and) 100 0)
     (if (or) 1000 0)
     (if (< 1 2 3) 10000 0)
     (if (< 1 3 2) 100000 0)
     (if (unless #f #t) 1000000 0)))

(define (main)
  (display (fib 10))
  (newline)
  (display "sum ")
  (display (sum-to 100))
  (newline)
  (+ (fib 5) (tak 6 4 2) (ack 1 1) (count-up 5) (arith -7 2) (logic 1 0)
     (if (my-even? 10) 1 0)))
