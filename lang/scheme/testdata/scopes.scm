;;; scopes.scm — optional arguments, procedure properties, nested scopes
;;; whose bindings live in callee-saved registers and frame slots.

(define* (scale x #:optional (k 10) (bias (* x 2)) pad)
  "x*k + bias + pad; bias defaults to twice x, pad to 0."
  (declare (inline #f) (category "math"))
  (+ (* x k) bias pad))

(define (probe a b)
  "Takes a backtrace inside a let, then returns a - b."
  (let ((d (- a b)))
    (backtrace)
    d))

(define (nest n)
  (let ((a (+ n 1)) (b (+ n 2)))
    (let* ((c (* a 10))
           (d (+ c b)))
      (let ((e (+ d 1)))
        (let ((f (+ e 1)))
          (let ((g (+ f 1)))
            (+ (probe (+ a b c d e f g) n) a)))))))

(define (siblings n)
  (let ((first (+ n 100)))
    (set! first (+ first 1))
    (display first) (newline))
  (let ((second (* n 3)))
    (display second) (newline))
  (let loop ((i 0) (acc 0))
    (if (< i n)
        (let ((sq (* i i)))
          (loop (+ i 1) (+ acc sq)))
        acc)))

(define (tail-in-let n)
  (let ((m (+ n 5)))
    (if (> m 100)
        m
        (scale m 2))))

(define (main)
  (display (scale 1)) (newline)
  (display (scale 1 2)) (newline)
  (display (scale 1 2 3)) (newline)
  (display (scale 1 2 3 4)) (newline)
  (display (nest 1)) (newline)
  (display (siblings 4)) (newline)
  (display (tail-in-let 1)) (newline)
  (tail-in-let 200))
