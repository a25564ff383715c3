package elfimage

// SetPositionIndex sets whether Link writes the procedure table's position
// index, and returns the previous setting: for the tests of the images
// linked before it. Not safe while another link runs.
func SetPositionIndex(on bool) bool {
	old := writePositionIndex
	writePositionIndex = on
	return old
}

// HasQueryState reports whether im has made its query state (the debug
// queries' indexes and remembered answers): for the tests of the first
// PositionAt, which answers without it.
func HasQueryState(im *Image) bool { return im.debug.Load() != nil }
