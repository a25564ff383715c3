package selfprof_test

import (
	"log"
	"net/http"
	"os"

	"github.com/elfimage/elfimage/selfprof"
)

// A CPU profile of the whole run, as with runtime/pprof, but with the
// frames of the code images hold: `go tool pprof -top cpu.pb.gz`.
func ExampleStartCPUProfile() {
	f, err := os.Create("cpu.pb.gz")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	selfprof.SetCPUProfileRate(1000)
	if err := selfprof.StartCPUProfile(f); err != nil {
		log.Fatal(err) // errors.Is(err, selfprof.ErrRefused): perf_event_open not allowed here
	}
	defer func() {
		if err := selfprof.StopCPUProfile(); err != nil {
			log.Fatal(err)
		}
	}()
	// ... run image code through native.Call ...
}

// The endpoint continuous profilers scrape, beside net/http/pprof's:
// `go tool pprof http://127.0.0.1:6060/debug/pprof/jitprofile?seconds=10`.
func ExampleHandler() {
	http.Handle("/debug/pprof/jitprofile", selfprof.Handler(nil))
	log.Fatal(http.ListenAndServe("127.0.0.1:6060", nil))
}

// A Profiler gives the profile and its counts.
func ExampleStart() {
	p, err := selfprof.Start(&selfprof.Options{Rate: 1000, StackSize: 16 << 10})
	if err != nil {
		log.Fatal(err)
	}
	// ... run image code ...
	prof, err := p.Stop()
	if err != nil {
		log.Fatal(err)
	}
	st := p.Stats()
	log.Printf("%d samples, %d lost, %d without Go callers, %d locations", st.Samples, st.Lost, st.Unjoined, len(prof.Location))
}
