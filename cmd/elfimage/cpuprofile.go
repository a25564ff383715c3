package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/elfimage/elfimage/internal/atomicfile"
	"github.com/elfimage/elfimage/internal/cleanup"
	"github.com/elfimage/elfimage/selfprof"
)

// cpuProfile is the -cpuprofile and -cpuprofile-rate flags of run and
// demo.
type cpuProfile struct {
	path string
	rate int
}

func (c *cpuProfile) register(fs interface {
	StringVar(p *string, name, value, usage string)
	IntVar(p *int, name string, value int, usage string)
}) {
	fs.StringVar(&c.path, "cpuprofile", "", "write a CPU profile of the run, with the image's procedures and the Go code, to `file` (pprof format, for go tool pprof)")
	fs.IntVar(&c.rate, "cpuprofile-rate", 1000, "samples per second of CPU time for -cpuprofile (`Hz`, 1 to 100000)")
}

// start starts the profile when asked for; stop writes it and reports
// lost samples on stderr.
func (c *cpuProfile) start(stderr io.Writer) (stop func() error, err error) {
	if c.path == "" {
		return func() error { return nil }, nil
	}
	if c.rate < 1 || c.rate > 100000 {
		return nil, fmt.Errorf("%w: -cpuprofile-rate %d: want 1 to 100000 Hz", errUsage, c.rate)
	}
	p, err := selfprof.Start(&selfprof.Options{Rate: c.rate})
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() error {
		prof, err := p.Stop()
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		var b bytes.Buffer
		if err := prof.Write(&b); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		st := p.Stats()
		if st.Lost > 0 || st.Unjoined > 0 || st.Malformed > 0 {
			fmt.Fprintf(stderr, "elfimage: cpu profile: %d samples, %d lost (ring full), %d without Go callers, %d malformed records\n", st.Samples, st.Lost, st.Unjoined, st.Malformed)
		}
		return atomicfile.Write(c.path, b.Bytes(), atomicfile.Options{Mode: 0o644, Track: cleanup.Track})
	}, nil
}
