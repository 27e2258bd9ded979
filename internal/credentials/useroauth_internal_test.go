package credentials

import "testing"

func TestResourceMetadataParam(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{`Bearer resource_metadata="https://u.example/.well-known/oauth-protected-resource/mcp", scope="a"`}, "https://u.example/.well-known/oauth-protected-resource/mcp"},
		{[]string{`Bearer error="invalid_token"`, `Bearer resource_metadata=https://u.example/prm, scope=a`}, "https://u.example/prm"},
		{[]string{`Bearer resource_metadata="unterminated`}, ""},
		{nil, ""},
	} {
		if got := resourceMetadataParam(tc.in); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	if !sameOrigin("https://u.example/.well-known/x", "https://U.example/mcp") {
		t.Error("same host, other case")
	}
	for _, other := range []string{"http://u.example/x", "https://evil.example/x", "https://u.example:8443/x"} {
		if sameOrigin(other, "https://u.example/mcp") {
			t.Errorf("%s taken for the upstream's origin", other)
		}
	}
}
