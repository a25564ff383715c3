;;; demo.scm — the program `elfimage demo` compiles, links, loads and runs.
;;; It prints a few kernel results and takes a backtrace three calls deep.
(define (fib n)
  "Return the n-th Fibonacci number, the slow way."
  (declare (inline #f) (category "math"))
  (if (< n 2)
      n
      (+ (fib (- n 1)) (fib (- n 2)))))

(define (tak x y z)
  "Takeuchi's function."
  (if (not (< y x))
      z
      (tak (tak (- x 1) y z)
           (tak (- y 1) z x)
           (tak (- z 1) x y))))

(define (ack m n)
  "Ackermann's function."
  (cond ((= m 0) (+ n 1))
        ((= n 0) (ack (- m 1) 1))
        (else (ack (- m 1) (ack m (- n 1))))))

(define* (sum-to n #:optional (from 1) (step (if (< n from) -1 1)))
  "Sum from..n (by default 1..n) with a named-let loop."
  (let loop ((i from) (acc 0))
    (if (= i (+ n step))
        acc
        (loop (+ i step) (+ acc i)))))
(define (inner a b)
  "Innermost frame: records a backtrace inside nested lets, returns a*b."
  (let ((p (* a b)))
    (let* ((q (+ p 1)) (r (- q 1))) (backtrace) r)))

;; middle and outer keep their results in let-bound registers.
(define (middle x y)
  (let ((r (inner (+ x 1) (* y 2))))
    (+ r 1)))

(define (outer n)
  (let ((v (middle n (+ n 10))))
    (- v 1)))

(define (main)
  (display "fib(25) = ") (display (fib 25)) (newline)
  (display "tak(18, 12, 6) = ") (display (tak 18 12 6)) (newline)
  (display "ack(2, 9) = ") (display (ack 2 9)) (newline)
  (display "sum(1..10000) = ") (display (sum-to 10000)) (newline)
  (display "outer(3) = ") (display (outer 3)) (newline)
  (display "sum(10..1) = ") (display (sum-to 1 10)) (newline)
  0)
