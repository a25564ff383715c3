Reverse the input: read every byte then write them back last first
Written for elfimage and placed in the public domain
The end of the input must read as 0 (bf's default)

>,[>,]      read bytes into cells 1 2 3 and on until the end of the input
<[.<]       write them from the last back to cell 1; cell 0 stays 0
