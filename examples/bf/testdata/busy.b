Spin in four nested loops for perf to sample then print ok and a newline
Written for elfimage and placed in the public domain

++++++++++++++++        cell 0: 16 rounds
[
  >-                    cell 1: 255
  [
    >-                  cell 2: 255
    [
      >-                cell 3: 255
      [>+<-]            move cell 3 into cell 4 one by one
      >[<+>-]<          and back
      <-
    ]
    <-
  ]
  <-
]
>>>>>++++++++++[>+++++++++++<-]>+.    o
----.                                 k
>++++++++++.                          newline
