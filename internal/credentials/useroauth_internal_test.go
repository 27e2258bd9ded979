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

func TestRefusal(t *testing.T) {
	const secret = "gw-s3cr3t:/+&= %"
	for _, tc := range []struct {
		code, desc string
		want       string
	}{
		{"invalid_client", "client authentication failed", "x (HTTP 401): invalid_client: client authentication failed"},
		{"invalid_client", "the secret gw-s3cr3t is wrong", "x (HTTP 401): invalid_client"},
		{"invalid_grant", "refresh token rt-0123456789abcdefghijklmnop revoked", "x (HTTP 401): invalid_grant"},
		{"rt-0123", "whatever", "x (HTTP 401): an unregistered error code"},
		{"", "no code, no description", "x (HTTP 401)"},
	} {
		if got := refusal("x", 401, tc.code, tc.desc, secret, ""); got != tc.want {
			t.Errorf("refusal(%q, %q) = %q, want %q", tc.code, tc.desc, got, tc.want)
		}
	}
}
