package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// This file is a small reader for the text/event-stream format, following the
// WHATWG "Interpreting an event stream" rules
// (https://html.spec.whatwg.org/multipage/server-sent-events.html), with two
// differences that suit an MCP client: events whose data is empty are not
// reported (they are the "priming" events of Streamable HTTP, which only
// carry an id), and one event may not be larger than a bound.

// sseEvent is one dispatched event.
type sseEvent struct {
	// Type is the event type; "message" when the stream named none.
	Type string
	// Data is the event's data lines joined with "\n". It is a fresh slice
	// for every event: the caller may keep it.
	Data []byte
	// ID is the stream's last event ID when the event was dispatched (it
	// carries over from earlier events, as in an EventSource).
	ID string
}

// errEventTooLarge is returned (wrapped) when one event, or one line, is
// larger than the reader's bound.
var errEventTooLarge = errors.New("event too large")

// maxRetry caps the reconnection delay an upstream can ask for with retry:.
const maxRetry = 5 * time.Second

// sseReader reads events from an event stream. It is not safe for concurrent
// use.
type sseReader struct {
	rd      io.Reader
	max     int // bound on one event's data; > 0
	lineMax int // bound on one line: max plus room for a field name

	buf    []byte  // buffered input is buf[r:w]
	pooled *[]byte // buf's entry in sseBufPool, until release
	r, w   int
	rerr   error // sticky error from rd, reported once the buffer is empty
	skipLF bool  // the last line ended with CR: a following LF belongs to it
	bomOK  bool  // the leading byte-order mark has been dealt with
	line   []byte

	// The WHATWG parser's buffers.
	data     []byte
	typ      string
	lastID   string
	retry    time.Duration
	hasRetry bool
}

// sseBufSize is the size of a reader's input buffer.
const sseBufSize = 32 << 10

// sseBufPool holds the readers' input buffers. Every upstream request
// answered with an event stream needs one; allocating it each time was
// the largest allocation of a tools/call (a quarter of the gateway's bytes
// for a 10 KB call).
var sseBufPool = sync.Pool{New: func() any { b := make([]byte, sseBufSize); return &b }}

// newSSEReader returns a reader of events from rd. lastID is the last event
// ID known before the stream started (for a resumed stream); max bounds one
// line and one event's data. Call release once the reader is no longer used.
func newSSEReader(rd io.Reader, lastID string, max int) *sseReader {
	bp := sseBufPool.Get().(*[]byte)
	return &sseReader{rd: rd, max: max, lineMax: max + 64, lastID: lastID, buf: *bp, pooled: bp}
}

// streamBufSize is the input buffer of a long-lived stream's reader (see
// newStreamReader).
const streamBufSize = 4 << 10

// newStreamReader is newSSEReader for a stream that lasts (a GET stream, a
// listen): it holds its buffer for its whole life, so a pooled one would
// only be kept from the calls, and a few of its messages a minute need no
// more than 4 KiB at a time (a longer line is gathered all the same).
func newStreamReader(rd io.Reader, max int) *sseReader {
	return &sseReader{rd: rd, max: max, lineMax: max + 64, buf: make([]byte, streamBufSize)}
}

// release returns the reader's input buffer to the pool. The events it
// returned stay valid (their data is never the buffer's). A released reader
// reads nothing more: Next returns an error.
func (s *sseReader) release() {
	if s.pooled == nil {
		return
	}
	sseBufPool.Put(s.pooled)
	s.pooled, s.buf, s.r, s.w = nil, nil, 0, 0
	if s.rerr == nil {
		s.rerr = errReleased
	}
}

// errReleased is what a released reader's Next returns.
var errReleased = errors.New("event stream reader released")

// LastEventID returns the last event ID seen so far (including on events that
// were not reported because their data was empty).
func (s *sseReader) LastEventID() string { return s.lastID }

// Retry returns the last reconnection delay the stream asked for, capped at
// maxRetry, and whether it asked for one.
func (s *sseReader) Retry() (time.Duration, bool) { return s.retry, s.hasRetry }

// Next returns the next event with non-empty data. At the end of the stream
// it returns io.EOF (an event not terminated by a blank line is discarded, as
// the WHATWG rules require), or the underlying reader's error.
func (s *sseReader) Next() (sseEvent, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if ev, ok := s.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if err := s.field(line); err != nil {
			return sseEvent{}, err
		}
	}
}

// dispatch ends the current event, returning it if it has data.
func (s *sseReader) dispatch() (sseEvent, bool) {
	data, typ := s.data, s.typ
	s.data, s.typ = nil, ""
	// The data buffer holds each data line followed by LF; WHATWG drops the
	// last LF. A data buffer of just "\n" (one empty data: line, as in a
	// priming event) is an event with empty data, which MCP gives no meaning.
	if len(data) > 0 {
		data = data[:len(data)-1]
	}
	if len(data) == 0 {
		return sseEvent{}, false
	}
	if typ == "" {
		typ = "message"
	}
	return sseEvent{Type: typ, Data: data, ID: s.lastID}, true
}

// field processes one non-empty line.
func (s *sseReader) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		// The buffer keeps a LF after each line and the last one is dropped,
		// so the event's data would be len(s.data)+len(value) bytes.
		if len(s.data)+len(value) > s.max {
			return fmt.Errorf("%w: more than %d bytes", errEventTooLarge, s.max)
		}
		if s.data == nil {
			s.data = make([]byte, 0, len(value)+1)
		}
		s.data = append(s.data, value...)
		s.data = append(s.data, '\n')
	case "event":
		s.typ = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			s.lastID = string(value)
		}
	case "retry":
		if ms, ok := parseRetry(value); ok {
			s.retry, s.hasRetry = ms, true
		}
	}
	return nil
}

// parseRetry parses a retry: value, which WHATWG accepts only when it is all
// ASCII digits. The result is capped at maxRetry.
func parseRetry(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var ms int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		if ms < int64(maxRetry/time.Millisecond) {
			ms = ms*10 + int64(c-'0')
		}
	}
	return min(time.Duration(ms)*time.Millisecond, maxRetry), true
}

// readLine returns the next line without its terminator (CRLF, LF or CR). The
// returned slice is valid until the next call. At the end of input, a final
// line without a terminator is discarded and the read error returned.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		if s.r == s.w {
			if err := s.fill(); err != nil {
				return nil, err
			}
			continue
		}
		if !s.bomOK {
			// A single UTF-8 byte-order mark at the start is ignored.
			if s.w-s.r < 3 && s.rerr == nil && bytes.HasPrefix([]byte("\xEF\xBB\xBF"), s.buf[s.r:s.w]) {
				if err := s.fill(); err != nil {
					return nil, err
				}
				continue
			}
			s.bomOK = true
			if bytes.HasPrefix(s.buf[s.r:s.w], []byte("\xEF\xBB\xBF")) {
				s.r += 3
			}
			continue
		}
		if s.skipLF {
			s.skipLF = false
			if s.buf[s.r] == '\n' {
				s.r++
			}
			continue
		}
		chunk := s.buf[s.r:s.w]
		i := lineEnd(chunk)
		if i < 0 {
			if len(s.line)+len(chunk) > s.lineMax {
				return nil, fmt.Errorf("%w: more than %d bytes", errEventTooLarge, s.max)
			}
			s.line = append(s.line, chunk...)
			s.r = s.w
			continue
		}
		s.skipLF = chunk[i] == '\r'
		s.r += i + 1
		if len(s.line) == 0 {
			line := chunk[:i]
			if len(line) > s.lineMax {
				return nil, fmt.Errorf("%w: more than %d bytes", errEventTooLarge, s.max)
			}
			return line, nil
		}
		if len(s.line)+i > s.lineMax {
			return nil, fmt.Errorf("%w: more than %d bytes", errEventTooLarge, s.max)
		}
		s.line = append(s.line, chunk[:i]...)
		return s.line, nil
	}
}

// lineEnd returns the index of the first CR or LF in b, or -1. It is
// bytes.IndexAny(b, "\r\n") with two vectorized IndexByte scans instead of
// a loop over every byte: an MCP event is one long data line (10 KB for a
// 10 KB tool result), and CR almost never occurs.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}

// fill reads more input into the (empty or nearly empty) buffer. It returns
// the reader's error only when there is nothing buffered.
func (s *sseReader) fill() error {
	if s.r == s.w && s.rerr != nil {
		return s.rerr
	}
	if s.r > 0 {
		n := copy(s.buf, s.buf[s.r:s.w])
		s.r, s.w = 0, n
	}
	if s.rerr != nil {
		return nil // still data buffered
	}
	// Retry a few empty reads rather than spin forever on a broken reader
	// (io.Reader allows 0, nil).
	for range 100 {
		n, err := s.rd.Read(s.buf[s.w:])
		s.w += n
		if err != nil {
			s.rerr = err
			break
		}
		if n > 0 {
			return nil
		}
	}
	if s.rerr == nil {
		s.rerr = io.ErrNoProgress
	}
	if s.r == s.w {
		return s.rerr
	}
	return nil
}

// appendSSEEvent appends ev in the event-stream format: an id line, an event
// line unless the type is "message", and one data line per line of data.
// Parsing the result yields ev again (ev.Data must not contain CR, which a
// parsed event never does).
func appendSSEEvent(dst []byte, ev sseEvent) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, ev.ID...)
	dst = append(dst, '\n')
	if ev.Type != "" && ev.Type != "message" {
		dst = append(dst, "event: "...)
		dst = append(dst, ev.Type...)
		dst = append(dst, '\n')
	}
	for line := range strings.SplitSeq(string(ev.Data), "\n") {
		dst = append(dst, "data: "...)
		dst = append(dst, line...)
		dst = append(dst, '\n')
	}
	return append(dst, '\n')
}
