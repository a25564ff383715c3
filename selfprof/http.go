package selfprof

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/pprof/profile"
)

// Handler returns an http.Handler that serves a CPU profile as
// net/http/pprof's /debug/pprof/profile does: it profiles the process for
// the request's ?seconds=N (default 30; at most the server's write
// timeout, when it has one, and 1 hour), then answers with the gzipped
// profile.proto (Content-Type application/octet-stream, a
// Content-Disposition naming "profile"), so that `go tool pprof
// http://HOST/PATH?seconds=N` and continuous profilers that scrape that
// endpoint get the frames of image code and of the Go code around it.
// ?hz=N sets the rate (default 100). opts gives the other options (nil:
// defaults). A request while another profile of [StartCPUProfile] or of a
// handler runs gets 500 with [ErrProfiling]'s text, as net/http/pprof
// answers "Could not enable CPU profiling: cpu profiling already in use";
// a refused perf_event_open gets 500 with the explanation; bad parameters
// 400. A client that goes away ends the profile early (nothing is sent).
//
// Goroutine labels (runtime/pprof.Labels, pprof.Do) are not in these
// profiles: they live in the runtime's goroutine structures, which only
// the runtime's own SIGPROF handler reads, and perf samples carry thread
// IDs, not goroutines.
func Handler(opts *Options) http.Handler {
	var base Options
	if opts != nil {
		base = *opts
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		sec := int64(30)
		if s := r.FormValue("seconds"); s != "" {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v <= 0 || v > 3600 {
				httpError(w, http.StatusBadRequest, fmt.Sprintf("bad seconds %q: want 1 to 3600", s))
				return
			}
			sec = v
		}
		if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.WriteTimeout > 0 && time.Duration(sec)*time.Second >= srv.WriteTimeout {
			httpError(w, http.StatusBadRequest, "profile duration exceeds server's WriteTimeout")
			return
		}
		o := base
		if s := r.FormValue("hz"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v <= 0 || v > maxRate {
				httpError(w, http.StatusBadRequest, fmt.Sprintf("bad hz %q: want 1 to %d", s, maxRate))
				return
			}
			o.Rate = v
		}
		p, err := startShared(&o)
		if err != nil {
			httpError(w, http.StatusInternalServerError, "Could not enable CPU profiling: "+err.Error())
			return
		}
		t := time.NewTimer(time.Duration(sec) * time.Second)
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
		prof, err := stopShared(p)
		if r.Context().Err() != nil {
			return
		}
		if err != nil {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
		prof.Write(w)
	})
}

// startShared takes the process-wide profile slot of StartCPUProfile.
func startShared(o *Options) (*Profiler, error) {
	cpuMu.Lock()
	defer cpuMu.Unlock()
	if cpuProf != nil {
		return nil, ErrProfiling
	}
	p, err := Start(o)
	if err != nil {
		return nil, err
	}
	cpuProf, cpuOut = p, nil
	return p, nil
}

func stopShared(p *Profiler) (*profile.Profile, error) {
	cpuMu.Lock()
	if cpuProf == p {
		cpuProf = nil
	}
	cpuMu.Unlock()
	return p.Stop()
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Go-Pprof", "1")
	w.Header().Del("Content-Disposition")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}
