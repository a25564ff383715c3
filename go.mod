module github.com/elfimage/elfimage

go 1.26.0

require (
	github.com/klauspost/compress v1.20.4
	golang.org/x/arch v0.33.0
	golang.org/x/sys v0.50.0
)
