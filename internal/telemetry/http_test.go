package telemetry

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestResponseWriterStarted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		do     func(w http.ResponseWriter)
		status int
	}{
		{"nothing", func(w http.ResponseWriter) { w.Header().Set("X", "y") }, 0},
		{"informational", func(w http.ResponseWriter) { w.WriteHeader(http.StatusEarlyHints) }, 0},
		{"status", func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) }, http.StatusAccepted},
		{"write", func(w http.ResponseWriter) { _, _ = w.Write([]byte("x")) }, http.StatusOK},
		{"flush", func(w http.ResponseWriter) { w.(http.Flusher).Flush() }, http.StatusOK},
		{"controller flush", func(w http.ResponseWriter) { _ = http.NewResponseController(w).Flush() }, http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		w := WrapResponseWriter(rec)
		tc.do(w)
		if w.Status() != tc.status || w.Started() != (tc.status != 0) {
			t.Errorf("%s: status %d, started %v; want %d", tc.name, w.Status(), w.Started(), tc.status)
		}
		if WrapResponseWriter(w) != w {
			t.Errorf("%s: a second wrapper around a ResponseWriter", tc.name)
		}
	}
}

// A flush that the writer underneath cannot do sends nothing: the
// response has not started.
func TestResponseWriterFlushNotSupported(t *testing.T) {
	w := WrapResponseWriter(struct{ http.ResponseWriter }{httptest.NewRecorder()})
	w.Flush()
	if w.Started() {
		t.Error("started by a flush that was not supported")
	}
}
