package upstream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadSized: readSized reads what io.ReadAll reads, with the same error,
// whatever the size announced (right, too small, too large, unknown, over
// the bound) and however the reader hands out its bytes.
func TestReadSized(t *testing.T) {
	const max = 1 << 20
	broken := errors.New("broken")
	for _, n := range []int{0, 1, 100, 10000, 70000} {
		body := strings.Repeat("x", n)
		for _, size := range []int64{int64(n), -1, 0, int64(n / 2), int64(n) * 2, max + 1} {
			readers := map[string]func() io.Reader{
				"whole":    func() io.Reader { return strings.NewReader(body) },
				"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
				"data+EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
				"broken":   func() io.Reader { return io.MultiReader(strings.NewReader(body), iotest.ErrReader(broken)) },
			}
			for name, rd := range readers {
				want, wantErr := io.ReadAll(rd())
				got, err := readSized(rd(), size, max)
				if !bytes.Equal(got, want) || !errors.Is(err, wantErr) && err != wantErr {
					t.Errorf("%d bytes, size %d, %s: %d bytes, %v; want %d bytes, %v", n, size, name, len(got), err, len(want), wantErr)
				}
			}
		}
	}
}

// TestReadSizedOneAllocation: an answer is read with one allocation, of
// its size, whether it announced that size or not (then it is read into a
// pooled buffer first).
func TestReadSizedOneAllocation(t *testing.T) {
	body := strings.Repeat("x", 10000)
	rd := strings.NewReader(body)
	for _, size := range []int64{int64(len(body)), -1} {
		allocs := testing.AllocsPerRun(20, func() {
			rd.Reset(body)
			if b, err := readSized(iotest.HalfReader(rd), size, 1<<20); err != nil || string(b) != body {
				t.Fatalf("%d bytes, %v", len(b), err)
			}
		})
		// One more: the HalfReader.
		if allocs != 2 {
			t.Errorf("size %d: %v allocations, want 2", size, allocs)
		}
	}
}

// TestReadSizedOwnMemory: what readSized returns for an answer of unknown
// size is its own, not the pooled buffer it was read into: reading the
// next answer leaves it as it was.
func TestReadSizedOwnMemory(t *testing.T) {
	first, err := readSized(strings.NewReader(strings.Repeat("a", 5000)), -1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := readSized(strings.NewReader(strings.Repeat("b", 5000)), -1, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if string(first) != strings.Repeat("a", 5000) {
		t.Error("the first answer changed when the next were read")
	}
}
