package elfimage

import (
	"sync"

	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/value"
)

// typeState holds the image's type reader (package dwarf/value), made on
// first use over its .debug_info: each type is decoded once and shared (a
// recursive type decodes to a cycle of *Type).
type typeState struct {
	once sync.Once
	r    *value.Reader
	err  error
}

// typeOf returns the type of a DIE's DW_AT_type: nil when it has none.
// Errors are those of reading .debug_info and of value.Reader.Type.
func (im *Image) typeOf(e *info.Entry) (*Type, error) {
	s := &im.dbg().types
	s.once.Do(func() {
		s.err = errIndexFault // if reading the mapped image faults
		d, err := im.infoData()
		if err != nil {
			s.err = err
			return
		}
		s.r, s.err = value.NewReader(d), nil
	})
	if s.err != nil {
		return nil, s.err
	}
	return s.r.TypeOf(e)
}
