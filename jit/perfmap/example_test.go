package perfmap_test

import (
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/elfimage/elfimage/jit/perfmap"
)

func Example() {
	dir, _ := os.MkdirTemp("", "perfmap")
	defer os.RemoveAll(dir)
	// perfmap.Default() writes /tmp/perf-PID.map, the file perf reads.
	w, err := perfmap.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	w.Add(0x7f0000001000, 0x40, "fib (fib.scm:1)")
	w.AddBatch([]perfmap.Entry{{Start: 0x7f0000001040, Size: 0x20, Name: "square"}})
	w.Close()
	b, _ := os.ReadFile(w.Path())
	fmt.Print(string(b))

	m, err := perfmap.Parse(strings.NewReader(string(b) + "0x7F0000001040 0x10 square'\r\n"))
	if err != nil {
		log.Fatal(err)
	}
	for _, pc := range []uint64{0x7f0000001008, 0x7f0000001048, 0x7f0000001058} {
		e, _ := m.Lookup(pc)
		fmt.Printf("%#x %s\n", pc, e.Name)
	}
	// Output:
	// 7f0000001000 40 fib (fib.scm:1)
	// 7f0000001040 20 square
	// 0x7f0000001008 fib (fib.scm:1)
	// 0x7f0000001048 square'
	// 0x7f0000001058 square
}
