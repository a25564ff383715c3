package selfprof

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// encodeSample is the test encoder of PERF_RECORD_SAMPLE of sampleType,
// written from perf_event_open(2) independently of the decoder: it lays
// out the fields in the manual's order and sets header.size.
func encodeSample(s *sample, misc uint16) []byte {
	le := binary.LittleEndian
	b := make([]byte, headerSize)
	b = le.AppendUint64(b, s.IP)
	b = le.AppendUint32(b, s.PID)
	b = le.AppendUint32(b, s.TID)
	b = le.AppendUint64(b, s.Time)
	b = le.AppendUint64(b, uint64(len(s.Callchain)))
	for _, v := range s.Callchain {
		b = le.AppendUint64(b, v)
	}
	b = le.AppendUint64(b, s.RegsABI)
	if s.RegsABI != regsABINone {
		for _, v := range s.Regs {
			b = le.AppendUint64(b, v)
		}
	}
	b = le.AppendUint64(b, s.StackSize)
	if s.StackSize != 0 {
		data := make([]byte, s.StackSize)
		copy(data, s.Stack)
		b = append(b, data...)
		b = le.AppendUint64(b, s.DynSize)
	}
	le.PutUint32(b, recordSample)
	le.PutUint16(b[4:], misc)
	le.PutUint16(b[6:], uint16(len(b)))
	return b
}

func encodeLost(id, n uint64) []byte {
	le := binary.LittleEndian
	b := make([]byte, headerSize, 24)
	le.PutUint32(b, recordLost)
	le.PutUint16(b[6:], 24)
	b = le.AppendUint64(b, id)
	return le.AppendUint64(b, n)
}

// setSize makes header.size the record's length.
func setSize(b []byte) []byte {
	binary.LittleEndian.PutUint16(b[6:], uint16(len(b)))
	return b
}

func testSample() *sample {
	stack := make([]byte, 64)
	for i := range stack {
		stack[i] = byte(i * 7)
	}
	return &sample{
		IP: 0x7f0000001234, PID: 42, TID: 43, Time: 123456789,
		Callchain: []uint64{contextUser, 0x7f0000001234, 0x401000},
		RegsABI:   regsABI64, Regs: make([]uint64, popcount(regsMask)),
		StackSize: 64, Stack: stack[:48], DynSize: 48,
	}
}

func TestDecodeSampleRoundTrip(t *testing.T) {
	s := testSample()
	for i := range s.Regs {
		s.Regs[i] = uint64(i) * 0x1111
	}
	b := encodeSample(s, 2)
	var got sample
	if err := decodeSample(b, 0, popcount(regsMask), &got); err != nil {
		t.Fatal(err)
	}
	if got.IP != s.IP || got.PID != s.PID || got.TID != s.TID || got.Time != s.Time ||
		!slices.Equal(got.Callchain, s.Callchain) || got.RegsABI != s.RegsABI || !slices.Equal(got.Regs, s.Regs) ||
		got.StackSize != s.StackSize || got.DynSize != s.DynSize || !bytes.Equal(got.Stack, s.Stack) {
		t.Errorf("decoded %+v\nwant %+v", got, *s)
	}
	// A kernel thread's sample: no registers, no stack.
	k := &sample{IP: 0xffffffff81000000, Callchain: []uint64{0xffffffff81000000}}
	var gk sample
	if err := decodeSample(encodeSample(k, 1), 0, popcount(regsMask), &gk); err != nil {
		t.Fatal(err)
	}
	if len(gk.Regs) != 0 || gk.Stack != nil || gk.IP != k.IP {
		t.Errorf("kernel sample decoded as %+v", gk)
	}
	n, err := decodeLost(encodeLost(7, 99), 0)
	if err != nil || n != 99 {
		t.Errorf("decodeLost = %d, %v; want 99", n, err)
	}
}

func TestDecodeSampleHostile(t *testing.T) {
	good := encodeSample(testSample(), 2)
	nregs := popcount(regsMask)
	le := binary.LittleEndian
	// Offsets of fields in good: header 8, ip 8, pid/tid 8, time 8, nr at 32.
	cases := []struct {
		name  string
		edit  func(b []byte) []byte
		field string
	}{
		{"truncated", func(b []byte) []byte { return setSize(b[:40]) }, "callchain"},
		{"size field lies", func(b []byte) []byte { return b[:40] }, "header size"},
		{"huge callchain", func(b []byte) []byte { le.PutUint64(b[32:], 1<<40); return b }, "callchain nr"},
		{"dyn_size above size", func(b []byte) []byte { le.PutUint64(b[len(b)-8:], 1000); return b }, "stack dyn_size"},
		{"trailing bytes", func(b []byte) []byte { return setSize(append(b, make([]byte, 8)...)) }, "record size"},
		{"stack size beyond record", func(b []byte) []byte {
			off := len(b) - 8 - 64 - 8
			le.PutUint64(b[off:], 1<<62)
			return b
		}, "stack data"},
		{"header only", func(b []byte) []byte { return b[:4] }, "header"},
	}
	for _, c := range cases {
		b := c.edit(slices.Clone(good))
		var s sample
		err := decodeSample(b, 0x40, nregs, &s)
		var de *decodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: err = %v, want a *decodeError", c.name, err)
			continue
		}
		if de.Off != 0x40 || !bytes.Contains([]byte(de.Field), []byte(c.field)) {
			t.Errorf("%s: error %q: want offset 0x40 and field %q", c.name, err, c.field)
		}
	}
}

// FuzzDecodeSample decodes arbitrary records; whatever decodes must
// encode back to the same bytes with the independent test encoder (the
// layout has no redundancy the decoder may ignore).
func FuzzDecodeSample(f *testing.F) {
	f.Add(encodeSample(testSample(), 2))
	f.Add(encodeSample(&sample{}, 0))
	f.Add(encodeSample(&sample{RegsABI: regsABI64, Regs: make([]uint64, popcount(regsMask))}, 0))
	f.Add(encodeLost(1, 2))
	nregs := popcount(regsMask)
	f.Fuzz(func(t *testing.T, b []byte) {
		var s sample
		if err := decodeSample(b, 0, nregs, &s); err != nil {
			return
		}
		// The header's type and misc are not the decoder's business, nor
		// the bytes of the stack copy past dyn_size (the kernel leaves
		// them unset and the decoder drops them): the encoder writes zeros.
		want := slices.Clone(b)
		want[0], want[1], want[2], want[3] = byte(recordSample), 0, 0, 0
		if s.StackSize != 0 {
			end := len(want) - 8
			clear(want[end-int(s.StackSize)+int(s.DynSize) : end])
		}
		got := encodeSample(&s, binary.LittleEndian.Uint16(b[4:]))
		if !bytes.Equal(want, got) {
			t.Fatalf("round trip differs:\n in  %x\n out %x", want, got)
		}
	})
}
