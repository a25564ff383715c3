Print the numbers 00 to 99 one per line with two nested loops
Written for elfimage and placed in the public domain

Cells 1 and 3 hold the two digits as characters; cells 0 and 2 count down
++++++[>++++++++>>++++++++<<<-]     cells 1 and 3 = 48 (the digit zero)
>>>>++++++++++                      cell 4 = 10 (newline)
<<<<++++++++++                      cell 0 = 10 tens to go
[                                   for each tens digit
  >>++++++++++                      cell 2 = 10 units to go
  [                                 for each units digit
    <.>>.>.                         print the tens digit and the units digit and a newline
    <+                              next units digit
    <-                              one fewer to go
  ]
  >----------                       units digit back to zero
  <<+                               next tens digit
  <-                                one fewer to go
]
