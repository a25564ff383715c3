package tooltest

import "time"

// SetTimeouts sets perfTimeout and buildTimeout and returns the function
// that restores them.
func SetTimeouts(perf, build time.Duration) (restore func()) {
	oldPerf, oldBuild := perfTimeout, buildTimeout
	perfTimeout, buildTimeout = perf, build
	return func() { perfTimeout, buildTimeout = oldPerf, oldBuild }
}

// SetReadyTimeouts sets readyTimeout and waitTimeout and returns the
// function that restores them.
func SetReadyTimeouts(ready, wait time.Duration) (restore func()) {
	oldReady, oldWait := readyTimeout, waitTimeout
	readyTimeout, waitTimeout = ready, wait
	return func() { readyTimeout, waitTimeout = oldReady, oldWait }
}
