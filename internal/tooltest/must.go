package tooltest

import "testing"

// Outputter is the result of a tool session, such as a gdbtest or
// lldbtest Result: ToolOutput returns the tool's output so far, "" for a
// nil result.
type Outputter interface {
	ToolOutput() string
}

// Must returns r, the result of a session run, when err is nil;
// otherwise it fails t at once with err and the tool's output so far (r
// may be nil: a run that failed before the tool printed anything).
func Must[R Outputter](t testing.TB, r R, err error) R {
	t.Helper()
	if err != nil {
		t.Fatalf("%v\n%s", err, r.ToolOutput())
	}
	return r
}

// MustRun calls run (a session's Run method) and returns its result as
// [Must] does.
func MustRun[R Outputter](t testing.TB, run func() (R, error)) R {
	t.Helper()
	r, err := run()
	return Must(t, r, err)
}
