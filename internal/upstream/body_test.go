package upstream

import (
	"io"
	"net/http"
	"testing"
)

// TestSetBody: a body in parts is sent whole, with its length, and read
// again as often as GetBody is called.
func TestSetBody(t *testing.T) {
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	if err != nil {
		t.Fatal(err)
	}
	parts := [][]byte{[]byte(`{"a":`), []byte(`"long params"`), []byte(`}`)}
	setBody(req, parts)
	const want = `{"a":"long params"}`
	if req.ContentLength != int64(len(want)) {
		t.Errorf("ContentLength %d, want %d", req.ContentLength, len(want))
	}
	for i := range 3 {
		body := req.Body
		if i > 0 {
			if body, err = req.GetBody(); err != nil {
				t.Fatal(err)
			}
		}
		b, err := io.ReadAll(body)
		if err != nil || string(b) != want {
			t.Errorf("reading %d: %q, %v", i, b, err)
		}
	}
	if string(parts[1]) != `"long params"` || len(parts) != 3 {
		t.Errorf("the parts changed: %q", parts)
	}
}
