package scheme

import _ "embed"

// DemoSource is the example program testdata/demo.scm that `elfimage demo`
// compiles, links, loads and runs: it prints fib, tak, ack and loop sums
// (sum-to is a define* with defaulted optional parameters, fib carries a
// declare) and takes a (backtrace) three calls deep (outer → middle →
// inner) with integer arguments, inside a let and a let* of inner. Compile
// it under the name DemoFile.
//
//go:embed testdata/demo.scm
var DemoSource []byte

// DemoFile is the file name to compile DemoSource under.
const DemoFile = "demo.scm"

// DemoOutput is what running DemoSource prints.
const DemoOutput = "fib(25) = 75025\ntak(18, 12, 6) = 7\nack(2, 9) = 21\nsum(1..10000) = 50005000\nouter(3) = 104\nsum(10..1) = 55\n"
