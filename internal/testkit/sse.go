package testkit

import (
	"bufio"
	"io"
	"strings"
)

// An SSEEvent is one event of a Server-Sent Events stream, as a test reads
// it: its id, its data lines joined, and its retry field.
type SSEEvent struct{ ID, Data, Retry string }

// ReadSSE returns the events of an SSE body as they arrive; the channel is
// closed, and the body with it, at the body's end (or when it breaks).
// Comments are skipped; a block with only an id or a retry field is an
// event too (a priming event, a reconnection delay). Lines are read up to
// 4 MiB.
func ReadSSE(body io.ReadCloser) <-chan SSEEvent {
	ch := make(chan SSEEvent, 1024)
	go func() {
		defer close(ch)
		defer body.Close()
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var ev SSEEvent
		seen := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if seen {
					ch <- ev
				}
				ev, seen = SSEEvent{}, false
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				ev.ID, seen = strings.TrimPrefix(line, "id: "), true
			case strings.HasPrefix(line, "retry: "):
				ev.Retry, seen = strings.TrimPrefix(line, "retry: "), true
			case strings.HasPrefix(line, "data:"):
				ev.Data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
				seen = true
			case strings.HasPrefix(line, "event:"):
				seen = true
			}
		}
	}()
	return ch
}
