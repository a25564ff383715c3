Copy the input to the output byte by byte until the end of the input (read as 0)
Written for elfimage and placed in the public domain
,[.,]
