package protocol

import "testing"

func TestUpdateCovers(t *testing.T) {
	for _, tc := range []struct {
		sub, uri string
		want     bool
	}{
		{"mem://a", "mem://a", true},
		{"mem://a", "mem://a/x", true},
		{"mem://a", "mem://a?v=2", true},
		{"mem://a", "mem://a#f", true},
		{"mem://a/", "mem://a/x", true},
		{"mem://a", "mem://ab", false},
		{"mem://a/x", "mem://a", false},
		{"", "mem://a", false},
		{"file:///dir", "file:///dir/f.txt", true},
		{"file:///dir", "file:///dir2/f.txt", false},
	} {
		if got := UpdateCovers(tc.sub, tc.uri); got != tc.want {
			t.Errorf("UpdateCovers(%q, %q) = %v, want %v", tc.sub, tc.uri, got, tc.want)
		}
	}
}
