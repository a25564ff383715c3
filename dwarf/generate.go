package dwarf

// The constants, their String methods and the form table are generated
// from constants.txt; TestGeneratedConstants fails when constants.go is
// stale.
//go:generate go run gen.go
