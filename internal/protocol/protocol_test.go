package protocol

import (
	"net/http"
	"testing"
)

// The header names are canonical, so they index an http.Header as they are.
func TestHeadersCanonical(t *testing.T) {
	for _, h := range []string{HeaderSessionID, HeaderProtocolVersion, HeaderLastEventID, HeaderMethod, HeaderName, HeaderParamPrefix + "Region"} {
		if c := http.CanonicalHeaderKey(h); c != h {
			t.Errorf("%q is not canonical (%q)", h, c)
		}
	}
}
