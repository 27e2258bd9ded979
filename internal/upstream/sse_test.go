package upstream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// parseSSE reads every event of input, and the final error.
func parseSSE(r io.Reader, max int) ([]sseEvent, *sseReader, error) {
	s := newSSEReader(r, "", max)
	var evs []sseEvent
	for {
		ev, err := s.Next()
		if err != nil {
			return evs, s, err
		}
		evs = append(evs, ev)
	}
}

func TestSSE(t *testing.T) {
	msg := func(data, id string) sseEvent { return sseEvent{Type: "message", Data: []byte(data), ID: id} }
	for _, tc := range []struct {
		name  string
		input string
		want  []sseEvent
	}{
		{name: "empty", input: ""},
		{name: "one event", input: "data: hello\n\n", want: []sseEvent{msg("hello", "")}},
		{name: "no space after colon", input: "data:hello\n\n", want: []sseEvent{msg("hello", "")}},
		{name: "only one space stripped", input: "data:  two\n\n", want: []sseEvent{msg(" two", "")}},
		{name: "multi-line data", input: "data: a\ndata:\ndata: b\n\n", want: []sseEvent{msg("a\n\nb", "")}},
		{name: "CRLF", input: "data: a\r\ndata: b\r\n\r\n", want: []sseEvent{msg("a\nb", "")}},
		{name: "CR", input: "data: a\rdata: b\r\rdata: c\r\r", want: []sseEvent{msg("a\nb", ""), msg("c", "")}},
		{name: "mixed endings", input: "data: a\r\n\ndata: b\n\r\n", want: []sseEvent{msg("a", ""), msg("b", "")}},
		{name: "comments ignored", input: ": ping\n\n:\ndata: x\n: mid\n\n", want: []sseEvent{msg("x", "")}},
		{name: "event type", input: "event: prime\ndata: x\n\ndata: y\n\n", want: []sseEvent{{Type: "prime", Data: []byte("x")}, msg("y", "")}},
		{name: "id carries over", input: "id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", want: []sseEvent{msg("a", "1"), msg("b", "1"), msg("c", "")}},
		{name: "id with NUL ignored", input: "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", want: []sseEvent{msg("a", "1"), msg("b", "1")}},
		{name: "priming event skipped, id kept", input: "id: p1\ndata:\n\ndata: a\n\n", want: []sseEvent{msg("a", "p1")}},
		{name: "no data skipped", input: "event: x\nid: 9\n\n", want: nil},
		{name: "unterminated event discarded", input: "data: a\n\ndata: b\n", want: []sseEvent{msg("a", "")}},
		{name: "unterminated line discarded", input: "data: a\n\ndata: b", want: []sseEvent{msg("a", "")}},
		{name: "unknown fields ignored", input: "foo: bar\ndata: a\nDATA: b\n\n", want: []sseEvent{msg("a", "")}},
		{name: "field without colon", input: "data\ndata\n\n", want: []sseEvent{msg("\n", "")}},
		{name: "BOM", input: "\xEF\xBB\xBFdata: a\n\n", want: []sseEvent{msg("a", "")}},
		{name: "second BOM not stripped", input: "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", want: []sseEvent{msg("b", "")}},
		{name: "JSON payload", input: "event: message\nid: 5\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
			want: []sseEvent{msg(`{"jsonrpc":"2.0","id":1,"result":{}}`, "5")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Byte-at-a-time reads exercise lines split across reads.
			for _, r := range []io.Reader{strings.NewReader(tc.input), iotest.OneByteReader(strings.NewReader(tc.input))} {
				got, _, err := parseSSE(r, 1<<20)
				if err != io.EOF {
					t.Fatalf("error %v, want io.EOF", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("events mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestSSERetry(t *testing.T) {
	for _, tc := range []struct {
		input string
		want  time.Duration
		ok    bool
	}{
		{input: "retry: 1500\n\n", want: 1500 * time.Millisecond, ok: true},
		{input: "retry: 0\n\n", want: 0, ok: true},
		{input: "retry: 99999999999999999999999\n\n", want: maxRetry, ok: true},
		{input: "retry: 1s\n\n"},
		{input: "retry: -1\n\n"},
		{input: "retry:\n\n"},
		{input: "retry: 10\nretry: x\n\n", want: 10 * time.Millisecond, ok: true},
	} {
		_, s, _ := parseSSE(strings.NewReader(tc.input), 1<<10)
		got, ok := s.Retry()
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: Retry() = %v, %v; want %v, %v", tc.input, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSSELimit(t *testing.T) {
	const max = 100
	for _, tc := range []struct {
		name    string
		input   string
		wantErr bool
	}{
		{name: "at the bound", input: "data: " + strings.Repeat("x", max) + "\n\n"},
		{name: "at the bound, two lines", input: "data: " + strings.Repeat("x", 50) + "\ndata: " + strings.Repeat("x", 49) + "\n\n"},
		{name: "over, one line", input: "data: " + strings.Repeat("x", max+1) + "\n\n", wantErr: true},
		{name: "over, many lines", input: strings.Repeat("data: xxxxxxxxx\n", 11) + "\n", wantErr: true},
		{name: "endless line", input: strings.Repeat("x", 10*max), wantErr: true},
		{name: "long comments are lines too", input: ":" + strings.Repeat("x", 10*max) + "\n", wantErr: true},
		{name: "many events under the bound", input: strings.Repeat("data: "+strings.Repeat("x", 90)+"\n\n", 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parseSSE(strings.NewReader(tc.input), max)
			if got := errors.Is(err, errEventTooLarge); got != tc.wantErr {
				t.Errorf("error %v, want errEventTooLarge: %v", err, tc.wantErr)
			}
		})
	}
}

func TestSSEReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))
	got, _, err := parseSSE(r, 1<<10)
	if err != boom {
		t.Errorf("error %v, want boom", err)
	}
	if len(got) != 1 {
		t.Errorf("got %d events, want 1", len(got))
	}
}

// FuzzSSE checks that the parser never panics, never returns more than its
// bound, and that encoding the events it parsed and parsing them again gives
// the same events.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: hello\n\n",
		"id: 1\nretry: 10\nevent: e\ndata: a\ndata: b\n\n",
		"data: a\r\ndata: b\r\n\r\n:comment\rdata:x\r\r",
		"\xEF\xBB\xBFdata:  x\n\nid\ndata\n\n",
		"id: 1\x00\ndata: a\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
	} {
		f.Add([]byte(s))
	}
	const max = 1 << 10
	f.Fuzz(func(t *testing.T, in []byte) {
		evs, _, err := parseSSE(bytes.NewReader(in), max)
		if err != io.EOF && !errors.Is(err, errEventTooLarge) {
			t.Fatalf("unexpected error %v", err)
		}
		var enc []byte
		for _, ev := range evs {
			if len(ev.Data) == 0 || len(ev.Data) > max {
				t.Fatalf("event data of %d bytes", len(ev.Data))
			}
			if bytes.ContainsAny(ev.Data, "\r") || strings.ContainsAny(ev.ID, "\r\n\x00") || strings.ContainsAny(ev.Type, "\r\n") {
				t.Fatalf("event %+v has line breaks", ev)
			}
			enc = appendSSEEvent(enc, ev)
		}
		again, _, errAgain := parseSSE(bytes.NewReader(enc), max+64)
		if errAgain != io.EOF {
			t.Fatalf("re-parsing: %v", errAgain)
		}
		if diff := cmp.Diff(evs, again); diff != "" {
			t.Fatalf("re-parsed events differ (-first +second):\n%s\nencoding: %q", diff, enc)
		}
		// The same bytes fed one at a time give the same events.
		slow, _, err2 := parseSSE(iotest.OneByteReader(bytes.NewReader(in)), max)
		if (err2 == io.EOF) != (err == io.EOF) {
			t.Fatalf("one byte at a time: error %v, at once: %v", err2, err)
		}
		if diff := cmp.Diff(evs, slow); diff != "" {
			t.Fatalf("one byte at a time (-at once +slow):\n%s", diff)
		}
	})
}

func TestLineEnd(t *testing.T) {
	for _, s := range []string{"", "abc", "a\nb", "a\rb", "a\r\nb", "a\n\rb", "\r", "\n", "ab\ncd\r", "ab\rcd\n"} {
		if got, want := lineEnd([]byte(s)), bytes.IndexAny([]byte(s), "\r\n"); got != want {
			t.Errorf("lineEnd(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestReleasedReader checks that a reader whose buffer went back to the
// pool reads nothing more, and that the events it returned stay intact.
func TestReleasedReader(t *testing.T) {
	s := newSSEReader(strings.NewReader("data: one\n\ndata: two\n\n"), "", 1<<10)
	ev, err := s.Next()
	if err != nil || string(ev.Data) != "one" {
		t.Fatalf("Next = %q, %v", ev.Data, err)
	}
	s.release()
	s.release() // twice is harmless
	// Whoever gets the buffer next writes over it.
	other := newSSEReader(strings.NewReader("data: xxxxxxxxxxxxxxxx\n\n"), "", 1<<10)
	if _, err := other.Next(); err != nil {
		t.Fatal(err)
	}
	if string(ev.Data) != "one" {
		t.Fatalf("event data changed to %q after release", ev.Data)
	}
	if _, err := s.Next(); !errors.Is(err, errReleased) {
		t.Fatalf("Next after release: %v, want errReleased", err)
	}
}
