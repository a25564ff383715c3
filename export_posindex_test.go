package elfimage

// SetPositionIndex sets whether Link writes the procedure table's position
// index, and returns the previous setting: for the tests of the images
// linked before it. Not safe while another link runs.
func SetPositionIndex(on bool) bool {
	old := writePositionIndex
	writePositionIndex = on
	return old
}
