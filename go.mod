module github.com/elfimage/elfimage

go 1.26.0

require (
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/ianlancetaylor/demangle v0.0.0-20250417193237-f615e6bd150b
	github.com/klauspost/compress v1.20.4
	golang.org/x/arch v0.33.0
	golang.org/x/sys v0.50.0
)
