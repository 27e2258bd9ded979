package upstream

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
)

// Redacted replaces a secret in text derived from an upstream's answer.
const Redacted = "[redacted]"

// minSecretLen is the shortest value a Scrubber replaces: shorter values
// (a header "X-Region: eu") are not secrets worth the name, and replacing
// them everywhere would garble every message.
const minSecretLen = 4

// A Scrubber removes the gateway's secrets for an upstream (the values of
// upstreams[].headers, and any credential given in Options.Secrets) from
// text derived from that upstream's answer before it becomes an error
// message a client sees or a log line: an upstream's 500 page that echoes
// the request headers must not hand its credential to every client.
//
// It replaces each secret as a whole, the credential of an
// "<auth-scheme> <credential>" value ("Bearer X": X alone, which an
// upstream may echo without the scheme), and each of those as escaped in a
// JSON string. A Scrubber is immutable and safe for concurrent use; the
// zero Scrubber and a nil *Scrubber replace nothing.
type Scrubber struct {
	r *strings.Replacer
	// long replaces the forms of at least minMessageSecret bytes (long,
	// longest first), the only ones looked for in whole messages.
	long      *strings.Replacer
	longForms []string
}

// minMessageSecret is the shortest secret looked for in a whole message
// (a result, a notification), as the content guards do: a short value
// would match ordinary content.
const minMessageSecret = 12

// NewScrubber returns a Scrubber for the given secret values.
func NewScrubber(secrets ...string) *Scrubber {
	var forms []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) < minSecretLen {
			return
		}
		forms = append(forms, s)
		if b, err := json.Marshal(s); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != s {
				forms = append(forms, esc)
			}
		}
	}
	for _, s := range secrets {
		add(s)
		if _, cred, ok := strings.Cut(strings.TrimSpace(s), " "); ok {
			add(cred)
		}
	}
	if len(forms) == 0 {
		return &Scrubber{}
	}
	// strings.Replacer tries the old strings in argument order at each
	// position: longest first, so that a whole "Bearer X" is replaced
	// rather than X inside it.
	slices.SortFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	forms = slices.Compact(forms)
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Redacted)
	}
	sc := &Scrubber{r: strings.NewReplacer(pairs...)}
	var long []string
	for _, f := range forms {
		if len(f) >= minMessageSecret {
			sc.longForms = append(sc.longForms, f)
			long = append(long, f, Redacted)
		}
	}
	if len(long) > 0 {
		sc.long = strings.NewReplacer(long...)
	}
	return sc
}

// message returns raw, one JSON-RPC message, with the secrets of at least
// minMessageSecret bytes replaced,
// and whether it held any. Looking costs one vectorized search per form;
// a message that holds none is returned as it is. A secret is replaced
// where it occurs, in a string or not: the marker is JSON-safe, so the
// message stays valid unless a secret held JSON's own punctuation, and
// then found is true and out is nil (the message must not be relayed).
func (s *Scrubber) message(raw []byte) (out []byte, found bool) {
	if s == nil || s.long == nil {
		return raw, false
	}
	for _, f := range s.longForms {
		if bytes.Contains(raw, []byte(f)) {
			found = true
			break
		}
	}
	if !found {
		return raw, false
	}
	out = []byte(s.long.Replace(string(raw)))
	if !jsonx.Valid(out) {
		return nil, true
	}
	return out, true
}

// Replace returns s with every secret replaced by [Redacted]; s itself if
// there is none.
func (s *Scrubber) Replace(text string) string {
	if s == nil || s.r == nil {
		return text
	}
	return s.r.Replace(text)
}

// rpcError returns e with the secrets removed from its message and data,
// e itself if it has none. Data that held a secret is dropped: replacing
// inside arbitrary JSON could leave it invalid.
func (s *Scrubber) rpcError(e *jsonrpc.Error) *jsonrpc.Error {
	if s == nil || s.r == nil || e == nil {
		return e
	}
	msg := s.r.Replace(e.Message)
	data := e.Data
	if len(data) > 0 && s.r.Replace(string(data)) != string(data) {
		data = nil
	}
	if msg == e.Message && len(data) == len(e.Data) {
		return e
	}
	return &jsonrpc.Error{Code: e.Code, Message: msg, Data: data}
}
