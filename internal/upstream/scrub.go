package upstream

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"sync"

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
	forms []string // longest first
	// longForms are the forms of at least minMessageSecret bytes, the
	// only ones looked for in whole messages.
	longForms []string

	// The replacers are built on first use: a Scrubber is made for every
	// call that carries credentials of its own (see credentialsOf), and
	// most calls never find a secret to replace.
	once    sync.Once
	r, long *strings.Replacer
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
		if !needsEscape(s) {
			return // as escaped in a JSON string, it is itself
		}
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
	sc := &Scrubber{forms: forms}
	for _, f := range forms {
		if len(f) >= minMessageSecret {
			sc.longForms = append(sc.longForms, f)
		}
	}
	return sc
}

// replacers builds the replacers, once.
func (s *Scrubber) replacers() (r, long *strings.Replacer) {
	s.once.Do(func() {
		pairs := make([]string, 0, 2*len(s.forms))
		for _, f := range s.forms {
			pairs = append(pairs, f, Redacted)
		}
		s.r = strings.NewReplacer(pairs...)
		if len(s.longForms) > 0 {
			long := make([]string, 0, 2*len(s.longForms))
			for _, f := range s.longForms {
				long = append(long, f, Redacted)
			}
			s.long = strings.NewReplacer(long...)
		}
	})
	return s.r, s.long
}

// holds reports whether text contains one of forms.
func holds[T string | []byte](text T, forms []string) bool {
	for _, f := range forms {
		if bytes.Contains([]byte(text), []byte(f)) {
			return true
		}
	}
	return false
}

// message returns raw, one JSON-RPC message, with the secrets of at least
// minMessageSecret bytes replaced,
// and whether it held any. Looking costs one vectorized search per form;
// a message that holds none is returned as it is. A secret is replaced
// where it occurs, in a string or not: the marker is JSON-safe, so the
// message stays valid unless a secret held JSON's own punctuation, and
// then found is true and out is nil (the message must not be relayed).
func (s *Scrubber) message(raw []byte) (out []byte, found bool) {
	if s == nil || !holds(raw, s.longForms) {
		return raw, false
	}
	_, long := s.replacers()
	out = []byte(long.Replace(string(raw)))
	if !jsonx.Valid(out) {
		return nil, true
	}
	return out, true
}

// Replace returns s with every secret replaced by [Redacted]; s itself if
// there is none.
func (s *Scrubber) Replace(text string) string {
	if s == nil || !holds(text, s.forms) {
		return text
	}
	r, _ := s.replacers()
	return r.Replace(text)
}

// rpcError returns e with the secrets removed from its message and data,
// e itself if it has none. Data that held a secret is dropped: replacing
// inside arbitrary JSON could leave it invalid.
func (s *Scrubber) rpcError(e *jsonrpc.Error) *jsonrpc.Error {
	if s == nil || len(s.forms) == 0 || e == nil {
		return e
	}
	msg := s.Replace(e.Message)
	data := e.Data
	if len(data) > 0 && holds([]byte(data), s.forms) {
		data = nil
	}
	if msg == e.Message && len(data) == len(e.Data) {
		return e
	}
	return &jsonrpc.Error{Code: e.Code, Message: msg, Data: data}
}

// needsEscape reports whether json.Marshal might write s other than as it
// is: control characters, quotes, backslashes, the HTML characters it
// escapes, and anything beyond ASCII (U+2028, U+2029, invalid UTF-8).
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= 0x80, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return true
		}
	}
	return false
}
