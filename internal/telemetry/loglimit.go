package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Log rate limiting.
//
// A failure that every request meets (the session store down, say) would
// otherwise write one line per request: 264 a second per replica at a
// modest load. Of the warnings and errors with the same message and the
// same keyAttrs the first of each window passes; the rest are counted in
// mcpgw_log_suppressed_total{message} and, when the window ends, one
// summary line says how many there were.

// keyAttrs are the attributes that tell records with one message apart:
// one upstream's (or issuer's) failure must not hide another's, nor one
// config problem or name conflict the next. They count whether the record
// or the logger (With) carries them. Their values are configured names, or
// bounded by MaxLogKeys like any key. An error text is never part of a
// key: it varies with the request.
var keyAttrs = map[string]bool{"upstream": true, "issuer": true, "problem": true, "name": true}

const (
	// LogWindow is how long the records like one that was logged are
	// suppressed.
	LogWindow = 10 * time.Second
	// MaxLogKeys bounds the windows a LogLimiter tracks at once. Messages
	// are the code's own strings, so a few dozen are in use; once the table
	// is full (and holds no ended window to reuse), every new key shares
	// one window, so the log stays bounded too.
	MaxLogKeys = 256
	// MaxLogMessageLabels bounds the message label of
	// mcpgw_log_suppressed_total.
	MaxLogMessageLabels = 64

	// LogSuppressedMessage is the message of the summary of a window.
	LogSuppressedMessage = "similar log records suppressed"
)

// overflowKey is the window of every key that found the table full.
const overflowKey = "\x00overflow"

// A LogLimiter is a slog.Handler that rate-limits the records at Warn and
// above of the handler it wraps (see above); records below Warn pass
// through. Handlers derived with WithAttrs and WithGroup share its windows.
// Build it with [NewLogLimiter].
type LogLimiter struct {
	inner slog.Handler
	s     *limitState
	with  string // the key attributes of WithAttrs, as they go in a key
}

var _ slog.Handler = (*LogLimiter)(nil)

type limitState struct {
	window  time.Duration
	max     int
	metrics *Metrics

	mu      sync.Mutex
	entries map[string]*logWindow
	closed  bool // no more windows: every record passes
}

// A logWindow is one key's current window.
type logWindow struct {
	message    string // the record's message, or "other" for the overflow window
	level      slog.Level
	until      time.Time
	suppressed int
	summary    slog.Handler // where the summary goes: the handler the first record took
	timer      *time.Timer  // pending summary, nil when none
}

// NewLogLimiter wraps h. Suppressed records are counted in m (which may be
// nil).
func NewLogLimiter(h slog.Handler, m *Metrics) *LogLimiter {
	return newLogLimiter(h, m, LogWindow, MaxLogKeys)
}

func newLogLimiter(h slog.Handler, m *Metrics, window time.Duration, max int) *LogLimiter {
	return &LogLimiter{inner: h, s: &limitState{window: window, max: max, metrics: m, entries: map[string]*logWindow{}}}
}

// Enabled implements slog.Handler.
func (l *LogLimiter) Enabled(ctx context.Context, level slog.Level) bool {
	return l.inner.Enabled(ctx, level)
}

// WithAttrs implements slog.Handler.
func (l *LogLimiter) WithAttrs(attrs []slog.Attr) slog.Handler {
	with := l.with
	for _, a := range attrs {
		with = appendKeyAttr(with, a)
	}
	return &LogLimiter{inner: l.inner.WithAttrs(attrs), s: l.s, with: with}
}

// WithGroup implements slog.Handler.
func (l *LogLimiter) WithGroup(name string) slog.Handler {
	return &LogLimiter{inner: l.inner.WithGroup(name), s: l.s, with: l.with}
}

// Handle implements slog.Handler.
func (l *LogLimiter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return l.inner.Handle(ctx, r)
	}
	key := r.Message + l.with
	r.Attrs(func(a slog.Attr) bool {
		key = appendKeyAttr(key, a)
		return true
	})
	if l.s.admit(key, r, l.inner) {
		return l.inner.Handle(ctx, r)
	}
	return nil
}

// appendKeyAttr appends a to key if it is one of keyAttrs.
func appendKeyAttr(key string, a slog.Attr) string {
	if keyAttrs[a.Key] {
		key += "\x00" + a.Key + "=" + a.Value.String()
	}
	return key
}

// admit reports whether r, under key, starts a window; if not, it counts
// r as suppressed.
func (s *limitState) admit(key string, r slog.Record, h slog.Handler) bool {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return true
	}
	w := s.entries[key]
	if w == nil {
		if len(s.entries) >= s.max {
			s.sweep(now)
		}
		if len(s.entries) >= s.max {
			key = overflowKey
			w = s.entries[key]
		}
	}
	if w == nil {
		message := r.Message
		if key == overflowKey {
			message = otherLabel
		}
		w = &logWindow{message: message}
		s.entries[key] = w
	}
	if !now.Before(w.until) {
		// A new window; a summary of the last one may still be pending,
		// and carries whatever is counted before it runs.
		w.until, w.level, w.summary = now.Add(s.window), r.Level, h
		return true
	}
	w.suppressed++
	s.metrics.LogSuppressed(w.message)
	if w.timer == nil {
		w.timer = time.AfterFunc(w.until.Sub(now), func() { s.summarize(w) })
	}
	return false
}

// Close logs the summaries still pending, at once, and stops limiting:
// after it no timer of l's runs, so nothing is logged late through a
// handler whose owner is gone. Records after Close pass through.
func (l *LogLimiter) Close() {
	s := l.s
	s.mu.Lock()
	s.closed = true
	var pending []*logWindow
	for _, w := range s.entries {
		if w.timer != nil && w.timer.Stop() {
			pending = append(pending, w)
		}
	}
	s.mu.Unlock()
	for _, w := range pending {
		s.summarize(w)
	}
}

// sweep drops the windows that ended with nothing left to summarize, s.mu
// held. The overflow window stays.
func (s *limitState) sweep(now time.Time) {
	for k, w := range s.entries {
		if k != overflowKey && !now.Before(w.until) && w.timer == nil {
			delete(s.entries, k)
		}
	}
}

// summarize logs how many records like w's first were suppressed.
func (s *limitState) summarize(w *logWindow) {
	s.mu.Lock()
	n, h, level, msg := w.suppressed, w.summary, w.level, w.message
	w.suppressed, w.timer = 0, nil
	s.mu.Unlock()
	if n == 0 {
		return
	}
	r := slog.NewRecord(time.Now(), level, LogSuppressedMessage, 0)
	r.AddAttrs(slog.String("message", msg), slog.Int("suppressed", n), slog.Duration("window", s.window))
	_ = h.Handle(context.Background(), r)
}
