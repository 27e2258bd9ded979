package upcall

import (
	"strconv"
	"testing"
)

// TestLogging: a session set to log is remembered, per upstream, and the
// table stays within MaxLogging however many come.
func TestLogging(t *testing.T) {
	var l Logging
	l.Set("a", "s1")
	if !l.On("a", "s1") || l.On("b", "s1") || l.On("a", "s2") {
		t.Fatal("On disagrees with Set")
	}
	for i := range 3 * MaxLogging {
		l.Set("a", strconv.Itoa(i))
	}
	n := 0
	l.m.Range(func(any, any) bool { n++; return true })
	if n > MaxLogging || !l.On("a", strconv.Itoa(3*MaxLogging-1)) {
		t.Errorf("%d sessions kept, bound %d", n, MaxLogging)
	}
}
