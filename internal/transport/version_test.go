package transport

import "testing"

// statelessVersion places a version string where comparing it as a string
// with "2026-07-28" does: dates by their date, anything else by its bytes.
func TestStatelessVersion(t *testing.T) {
	for _, s := range []string{
		"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-27",
		"2026-07-28", "2026-08-01", "2099-01-01",
		"1.0", "0", "2025-13-01", "2026-07-2", "2026-07-28-draft", "2026-7-1",
		"DRAFT-2026-v1", "latest", "2", "2026", "+1", "２",
	} {
		if got, want := statelessVersion(s), s >= "2026-07-28"; got != want {
			t.Errorf("statelessVersion(%q) = %v, want %v", s, got, want)
		}
	}
}
