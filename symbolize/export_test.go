package symbolize

// ScanAlways makes every lookup take the scan path (scanFrames) until the
// returned function restores the default: scan the first address of a
// unit only.
func ScanAlways() (restore func()) {
	scanAlways.Store(true)
	return func() { scanAlways.Store(false) }
}
