package share

import "testing"

// TestShares: Take names the bound that refused (pool, principal, tenant),
// counts nothing it refused, and Give frees the entry for anyone.
func TestShares(t *testing.T) {
	var s Counts
	sh := Share{Pool: 4, Principal: 2, Tenant: 3}
	for _, c := range []struct {
		principal, tenant string
		want              int
	}{
		{"a", "t1", 0}, {"a", "t1", 0}, {"a", "t1", Principal},
		{"b", "t1", 0}, {"c", "t1", Tenant},
		{"d", "t2", 0}, {"e", "t2", Pool},
	} {
		if got := s.Take(c.principal, c.tenant, sh); got != c.want {
			t.Errorf("Take(%s, %s) = %d, want %d", c.principal, c.tenant, got, c.want)
		}
	}
	if s.Held() != 4 {
		t.Fatalf("held %d, want 4", s.Held())
	}
	s.Give("b", "t1")
	if got := s.Take("e", "t2", sh); got != 0 {
		t.Errorf("a freed entry refused: %d", got)
	}
	for range 2 {
		s.Give("a", "t1")
	}
	if len(s.principals) != 2 || s.principals["a"] != 0 {
		t.Errorf("principals %v: a's entry not dropped at zero", s.principals)
	}
}
