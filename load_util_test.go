package elfimage_test

import (
	hexpkg "encoding/hex"
	"os"
)

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }

func hex(b []byte) string { return hexpkg.EncodeToString(b) }
