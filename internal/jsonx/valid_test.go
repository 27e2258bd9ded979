package jsonx

import "testing"

func TestValidWithin(t *testing.T) {
	for _, c := range []struct {
		s    string
		max  int
		want bool
	}{
		{`[[1]]`, 2, true},
		{`[[1]]`, 1, false},
		{`{"a":{"b":[]}}`, 3, true},
		{`{"a":{"b":[]}}`, 2, false},
		{`"[[[["`, 0, true},
		{`[1`, 5, false},
		{`1`, 20000, true},
	} {
		if got := ValidWithin([]byte(c.s), c.max); got != c.want {
			t.Errorf("ValidWithin(%s, %d) = %v", c.s, c.max, got)
		}
	}
}
