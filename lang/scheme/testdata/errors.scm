;; A run that takes one backtrace and then ends with (error ...) two calls deep.
(define (check x)
  (if (< x 0)
      (error "negative value" x (* x 2))
      x))

(define (divide a b) (quotient a b))

(define (deep n)
  (+ 1 (deep (+ n 1))))

(define (main)
  (check 5)
  (backtrace)
  (divide 10 2)
  (check -21))
