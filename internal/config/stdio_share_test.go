package config

import "testing"

// TestStdioShares: the shares of stdio processes are derived from the pool
// when not set, and an explicit 0 stays 0 (no bound but the pool's), not
// the default.
func TestStdioShares(t *testing.T) {
	yaml := `
upstreams:
  - name: a
    command: [a]
    stdio:
      max_processes: 10
  - name: b
    command: [b]
    stdio:
      max_processes: 10
      max_processes_per_principal: 0
      max_processes_per_tenant: 7
limits:
  stdio_processes: 3
  stdio_processes_per_tenant: 0
` + anon
	c, err := Parse("test.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	for _, tc := range []struct {
		name         string
		p, t, wp, wt int
	}{
		{"a", 0, 0, 2, 5},
		{"b", 0, 0, 0, 7},
		{"limits", 0, 0, 1, 0},
	} {
		if tc.name == "limits" {
			tc.p, tc.t = c.Limits.StdioShares()
		} else {
			tc.p, tc.t = c.Upstream(tc.name).Stdio.Shares()
		}
		if tc.p != tc.wp || tc.t != tc.wt {
			t.Errorf("%s: shares %d, %d; want %d, %d", tc.name, tc.p, tc.t, tc.wp, tc.wt)
		}
	}
	if _, err := Parse("test.yaml", []byte("upstreams:\n  - name: a\n    command: [a]\n    stdio:\n      max_processes_per_tenant: -1\n"+anon), env(nil)); err == nil {
		t.Error("a negative share parsed")
	}
}
