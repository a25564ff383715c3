package addrmap

import (
	"errors"
	"testing"
)

// FuzzOps runs a byte-coded sequence of Insert (or InsertRef), Remove,
// RemoveFunc, Acquire, Release and Lookup against a linear model, checking
// every result, that free runs exactly once and only after the last
// Release.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{0, 10, 5, 3, 10, 4, 2, 10, 0, 4, 10, 1, 3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		type mrange struct {
			r     Range
			v     int
			freed *int
		}
		var (
			m     Map[int]
			model []mrange
			held  []*Ref[int]
			heldF []*int // free counter of each held entry
		)
		if len(ops) > 3000 {
			ops = ops[:3000]
		}
		for k := 0; k+2 < len(ops); k += 3 {
			op, a, b := ops[k]%6, uintptr(ops[k+1]), uintptr(ops[k+2]%16)
			switch op {
			case 0: // Insert [a, a+b)
				overlap := b == 0
				for _, e := range model {
					if a < e.r.End && e.r.Start < a+b {
						overlap = true
					}
				}
				var err error
				if ops[k] >= 128 { // with a Ref of the caller's
					r := new(Ref[int])
					err = m.InsertRef(a, a+b, k, r)
					if err == nil {
						if got, aerr := m.Acquire(a); aerr != nil || got != r {
							t.Fatalf("Acquire(%d) after InsertRef = %p, %v; want the Ref given, %p", a, got, aerr, r)
						} else {
							got.Release()
						}
					}
				} else {
					err = m.Insert(a, a+b, k)
				}
				if (err != nil) != overlap {
					t.Fatalf("Insert(%d, %d) = %v, model overlap %v", a, a+b, err, overlap)
				}
				if err == nil {
					model = append(model, mrange{Range{a, a + b}, k, new(int)})
				}
			case 1, 2: // Remove / RemoveFunc at a
				idx := -1
				for i, e := range model {
					if e.r.Start == a {
						idx = i
					}
				}
				if op == 1 {
					v, ok := m.Remove(a)
					if ok != (idx >= 0) || (ok && v != model[idx].v) {
						t.Fatalf("Remove(%d) = %d, %v", a, v, ok)
					}
				} else {
					var fr *int
					wantV := -1
					if idx >= 0 {
						fr, wantV = model[idx].freed, model[idx].v
					}
					ok, freedNow := m.RemoveFunc(a, func(v int) {
						if v != wantV {
							t.Fatalf("free(%d), want %d", v, wantV)
						}
						*fr++
					})
					if ok != (idx >= 0) {
						t.Fatalf("RemoveFunc(%d) = %v", a, ok)
					}
					if ok {
						n := 0
						for _, h := range heldF {
							if h == fr {
								n++
							}
						}
						if want := map[bool]int{true: 1, false: 0}[n == 0]; *fr != want || freedNow != (n == 0) {
							t.Fatalf("RemoveFunc with %d Refs held: free ran %d times, freed = %v", n, *fr, freedNow)
						}
					}
				}
				if idx >= 0 {
					model = append(model[:idx], model[idx+1:]...)
				}
			case 3, 4: // Acquire / Lookup a
				want := -1
				var fr *int
				for _, e := range model {
					if e.r.Contains(a) {
						want, fr = e.v, e.freed
					}
				}
				if op == 3 {
					r, err := m.Acquire(a)
					if (err == nil) != (want >= 0) || (err == nil && r.Value() != want) {
						t.Fatalf("Acquire(%d) = %v, %v; want %d", a, r, err, want)
					}
					if err == nil {
						held, heldF = append(held, r), append(heldF, fr)
					}
				} else {
					v, err := m.Lookup(a)
					if (err == nil) != (want >= 0) || (err == nil && v != want) || (err != nil && !errors.Is(err, ErrNotFound)) {
						t.Fatalf("Lookup(%d) = %d, %v; want %d", a, v, err, want)
					}
				}
			case 5: // Release the b-th held Ref
				if len(held) == 0 {
					continue
				}
				i := int(b) % len(held)
				r, fr := held[i], heldF[i]
				held, heldF = append(held[:i], held[i+1:]...), append(heldF[:i], heldF[i+1:]...)
				before := *fr
				r.Release()
				if *fr != before && *fr != 1 {
					t.Fatalf("free ran %d times", *fr)
				}
			}
		}
		if m.Len() != len(model) {
			t.Fatalf("Len = %d, model %d", m.Len(), len(model))
		}
	})
}
