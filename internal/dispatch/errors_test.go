package dispatch

import (
	"net/http"
	"testing"
)

// TestStatelessStatus: the HTTP status of a 2026-07-28 error answer follows
// its code.
func TestStatelessStatus(t *testing.T) {
	for code, want := range map[int64]int{
		-32601: http.StatusNotFound,
		-32602: http.StatusBadRequest,
		-32020: http.StatusBadRequest,
		-32021: http.StatusBadRequest,
		-32022: http.StatusBadRequest,
		-32603: http.StatusOK,
		-32002: http.StatusOK,
		-32000: http.StatusOK,
		42:     http.StatusOK,
	} {
		if got := statelessStatus(code); got != want {
			t.Errorf("%d: %d, want %d", code, got, want)
		}
	}
}
