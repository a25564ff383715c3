A hello world program in Brainfuck for elfimage's examples/bf
Written for elfimage and placed in the public domain

Cell 0 counts ten rounds that fill cells 1 to 4 with 70 100 30 10
++++++++++[>+++++++>++++++++++>+++>+<<<<-]
>++.                    H
>+.                     e
+++++++..               l l
+++.                    o
>++++++++++++++.        comma
------------.           space
<<+++++++++++++++.      W
>.                      o
+++.                    r
------.                 l
--------.               d
>+.                     exclamation mark
>.                      newline
