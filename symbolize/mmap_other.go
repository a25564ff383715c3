//go:build !unix

package symbolize

import (
	"io"
	"os"
)

// mapFile reads file into memory where mmap is not available.
func mapFile(file *os.File) ([]byte, func() error, error) {
	data, err := io.ReadAll(file)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
