package pipe

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mcpgw/gateway/internal/protocol"
)

// What the Handler writes and rewrites on the wire: its JSON and SSE
// answers, the progress tokens it swaps for its own (so that two sessions
// on one Conn cannot collide), ids, and the queues of a session's streams.

// queue adds m to ch, or drops it when ch is full.
func queue(ch chan []byte, m []byte) {
	select {
	case ch <- m:
	default:
	}
}

// swapToken returns params with its _meta.progressToken replaced by tok
// (when tok is not nil), and the token it had (nil if none).
func swapToken(params json.RawMessage, tok []byte) (json.RawMessage, []byte) {
	if !bytes.Contains(params, []byte(`"progressToken"`)) {
		return params, nil
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params, nil
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) != nil || meta["progressToken"] == nil {
		return params, nil
	}
	old := meta["progressToken"]
	if tok == nil {
		return params, old
	}
	meta["progressToken"] = tok
	p["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(p)
	if err != nil {
		return params, old
	}
	return out, old
}

// progressTokenOf returns the progressToken of a notifications/progress's
// params, nil if none.
func progressTokenOf(params json.RawMessage) []byte {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.Token) == 0 {
		return nil
	}
	return p.Token
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// swapProgressToken returns the params of a notifications/progress with
// progressToken replaced by tok.
func swapProgressToken(params json.RawMessage, tok []byte) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params
	}
	p["progressToken"] = tok
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, sid string, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	if sid != "" {
		w.Header().Set(protocol.HeaderSessionID, sid)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeEvent(w io.Writer, rc *http.ResponseController, m []byte) error {
	buf := make([]byte, 0, len(m)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, m...)
	buf = append(buf, "\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	_ = rc.Flush()
	return nil
}

// newID returns a random session id: 128 bits, URL-safe.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
