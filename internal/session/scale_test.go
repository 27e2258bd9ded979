package session

import (
	"math/rand/v2"
	"testing"
)

// TestScale checks the heap against a plain map under random reweighing:
// top is always a heaviest holder, and holders at zero leave.
func TestScale(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s scale[int]
	want := map[int]int64{}
	for range 20_000 {
		k := r.IntN(50)
		d := int64(r.IntN(7) - 3)
		if got, w := s.add(k, d), max(want[k]+d, 0); got != w {
			t.Fatalf("add(%d, %d) = %d, want %d", k, d, got, w)
		}
		if want[k] = max(want[k]+d, 0); want[k] == 0 {
			delete(want, k)
		}
		if s.len() != len(want) {
			t.Fatalf("len = %d, want %d", s.len(), len(want))
		}
		var heaviest int64
		for _, w := range want {
			heaviest = max(heaviest, w)
		}
		k, w, ok := s.top()
		if ok != (len(want) > 0) || w != heaviest || (ok && want[k] != w) {
			t.Fatalf("top = %d, %d, %v; want weight %d", k, w, ok, heaviest)
		}
	}
}
