package console

// Signing in with OpenID Connect (admin.console.auth.oidc).
//
// A GET of a console page without a session is sent to the provider's
// authorization endpoint: authorization code, PKCE S256, state and nonce.
// What the callback needs to finish (state, nonce, PKCE verifier, the page
// asked for) travels in a short-lived cookie, sealed (AES-GCM) under a
// key of this process, and nothing is kept in memory: a sign-in is bounded
// by the cookie's lifetime and the browser holds it. The callback redeems
// the code (golang.org/x/oauth2), verifies the ID token (go-oidc: the
// provider's keys, issuer, audience, expiry), checks the nonce and the
// allow-list, and sets the session cookie: the subject and an expiry,
// signed (HMAC-SHA256) under a key of this process and of the
// admin.console.auth.oidc in force, so that a restart or a reload that
// changes who may read the console signs everyone out. No token is kept,
// logged or rendered.

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/mcpgw/gateway/internal/config"
)

const (
	// CallbackPath is where the provider sends the browser back:
	// admin.console.auth.oidc.redirect_url ends in it.
	CallbackPath = config.ConsoleCallbackPath
	// flowCookie carries a sign-in in progress to the callback.
	flowCookie = "mcpgw_console_oidc"
	// SessionTTL bounds a session: the reader signs in again after it.
	SessionTTL = 8 * time.Hour
	// flowTTL bounds a sign-in at the provider.
	flowTTL = 10 * time.Minute
	// oidcTimeout bounds each exchange with the provider.
	oidcTimeout = 10 * time.Second
	// metadataTTL is how long the provider's discovery document is reused.
	metadataTTL = time.Hour
	// maxSubject bounds the subject a session cookie carries (OpenID
	// Connect Core §2: sub is at most 255 ASCII characters).
	maxSubject = 255
	// maxNext bounds the page a sign-in returns to.
	maxNext = 1024
)

// oidcAuth is what the OIDC sign-in keeps for the life of the handler:
// its keys and the provider's metadata.
type oidcAuth struct {
	hc   *http.Client
	log  *slog.Logger
	now  func() time.Time
	key  []byte      // signs sessions (with the config's fingerprint)
	flow cipher.AEAD // seals flow cookies

	mu       sync.Mutex
	issuer   string // of provider
	provider *oidc.Provider
	fetched  time.Time
}

func newOIDCAuth(hc *http.Client, log *slog.Logger) *oidcAuth {
	switch {
	case hc == nil:
		hc = &http.Client{Timeout: oidcTimeout}
	case hc.Timeout == 0:
		// go-oidc fetches keys in the background with this client: it
		// needs a bound of its own.
		c := *hc
		c.Timeout = oidcTimeout
		hc = &c
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	block, _ := aes.NewCipher(derive(secret, "flow"))
	aead, _ := cipher.NewGCM(block)
	return &oidcAuth{hc: hc, log: log, now: time.Now, key: derive(secret, "session"), flow: aead}
}

// derive returns a 32-byte key for purpose from secret.
func derive(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("mcpgw console " + purpose))
	return m.Sum(nil)
}

// fingerprint identifies what of o decides who signs in: a session or a
// sign-in made under another is void.
func fingerprint(o *config.ConsoleOIDC) []byte {
	b, _ := json.Marshal([]any{o.Issuer, o.ClientID, o.RedirectURL, o.Subjects, o.GroupsClaim, o.Groups})
	s := sha256.Sum256(b)
	return s[:]
}

type userKey struct{}

// User returns the subject signed in to the console with OpenID Connect
// for the request of ctx, "" for none.
func User(ctx context.Context) string {
	s, _ := ctx.Value(userKey{}).(string)
	return s
}

// secure reports whether the console's cookies need TLS: unless its
// callback is plain http (a loopback address), yes.
func secure(o *config.ConsoleOIDC) bool {
	return !strings.HasPrefix(o.RedirectURL, "http:")
}

// oidcGate serves what the OIDC sign-in owns (the callback, sign-out, the
// redirect to the provider) and returns r, with its reader (see [User]),
// when it may read the console; false when it answered.
func (h *handler) oidcGate(w http.ResponseWriter, r *http.Request, o *config.ConsoleOIDC) (*http.Request, bool) {
	switch r.URL.Path {
	case CallbackPath:
		h.oidcCallback(w, r, o)
		return nil, false
	case Path + "/logout":
		h.oidcLogout(w, r, o)
		return nil, false
	}
	if sub, ok := h.oidc.session(r, o); ok {
		return r.WithContext(context.WithValue(r.Context(), userKey{}, sub)), true
	}
	// Only a page the reader navigates to starts a sign-in: not a form's
	// post, not the refresh script's fetch (which would follow the
	// redirect in vain, and replace a sign-in under way in another tab).
	mode := r.Header.Get("Sec-Fetch-Mode")
	if r.Method != http.MethodGet && r.Method != http.MethodHead || mode != "" && mode != "navigate" {
		h.oidcMessage(w, r, http.StatusUnauthorized, "Signed out", "Your console session has ended.", Path+"/")
		return nil, false
	}
	h.oidcBegin(w, r, o)
	return nil, false
}

// oidcMessage renders a page of the sign-in: a message, and a link to
// start again if link is not "".
func (h *handler) oidcMessage(w http.ResponseWriter, r *http.Request, status int, title, text, link string) {
	h.render(w, r, status, "oidc", page{Title: title, Data: oidcPage{Text: text, Link: link}})
}

type oidcPage struct{ Text, Link string }

// metadata returns the provider of issuer, from its discovery document.
func (a *oidcAuth) metadata(ctx context.Context, issuer string) (*oidc.Provider, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.provider != nil && a.issuer == issuer && a.now().Sub(a.fetched) < metadataTTL {
		return a.provider, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, a.hc), issuer)
	if err != nil {
		return nil, err
	}
	a.provider, a.issuer, a.fetched = p, issuer, a.now()
	return p, nil
}

func oauthConfig(o *config.ConsoleOIDC, p *oidc.Provider) *oauth2.Config {
	ep := p.Endpoint()
	ep.AuthStyle = oauth2.AuthStyleInHeader
	if o.ClientSecret == "" {
		ep.AuthStyle = oauth2.AuthStyleInParams // a public client: client_id in the form
	}
	return &oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, RedirectURL: o.RedirectURL, Scopes: o.OIDCScopes(), Endpoint: ep}
}

// flow is a sign-in under way, in its cookie.
type flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"u"`
	Expires  int64  `json:"e"`
}

// provider returns the provider's metadata, or answers that sign-in is
// unavailable.
func (h *handler) provider(ctx context.Context, w http.ResponseWriter, r *http.Request, o *config.ConsoleOIDC) (*oidc.Provider, bool) {
	p, err := h.oidc.metadata(ctx, o.Issuer)
	if err != nil {
		h.oidc.log.Warn("console: the OpenID provider's discovery failed", "issuer", o.Issuer, "error", truncate(err.Error(), 300))
		h.oidcMessage(w, r, http.StatusBadGateway, "Sign-in unavailable", "The console could not reach its OpenID provider. Try again later.", Path+"/")
		return nil, false
	}
	return p, true
}

// oidcBegin sends the browser to sign in at the provider, to come back to
// the page it asked for.
func (h *handler) oidcBegin(w http.ResponseWriter, r *http.Request, o *config.ConsoleOIDC) {
	a := h.oidc
	ctx, cancel := context.WithTimeout(r.Context(), oidcTimeout)
	defer cancel()
	p, ok := h.provider(ctx, w, r, o)
	if !ok {
		return
	}
	next := safeNext(r.URL.RequestURI())
	if len(next) > maxNext {
		next = Path + "/"
	}
	f := flow{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(), Next: next, Expires: a.now().Add(flowTTL).Unix()}
	http.SetCookie(w, &http.Cookie{
		Name: flowCookie, Value: a.seal(f, o), Path: CallbackPath, MaxAge: int(flowTTL.Seconds()),
		// Lax: the callback is a top-level navigation from the
		// provider's site.
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(o),
	})
	http.Redirect(w, r, oauthConfig(o, p).AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), oidc.Nonce(f.Nonce)), http.StatusSeeOther)
}

// oidcCallback finishes a sign-in: the provider's answer must match the
// flow this browser started.
func (h *handler) oidcCallback(w http.ResponseWriter, r *http.Request, o *config.ConsoleOIDC) {
	a := h.oidc
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// A sign-in is tried once.
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Path: CallbackPath, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(o)})
	const again = "Open the console again to sign in."
	q := r.URL.Query()
	f, err := a.open(r, o)
	if err != nil {
		a.log.Info("console: sign-in refused", "reason", err.Error(), "remote", r.RemoteAddr)
		h.oidcMessage(w, r, http.StatusBadRequest, "Not signed in", "This answer does not belong to a sign-in this browser started here, or the sign-in took too long. "+again, Path+"/")
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		a.log.Warn("console: sign-in refused", "reason", "state mismatch", "remote", r.RemoteAddr)
		h.oidcMessage(w, r, http.StatusForbidden, "Not signed in", "This answer does not belong to the sign-in this browser started. "+again, Path+"/")
		return
	}
	if e := q.Get("error"); e != "" {
		h.oidcMessage(w, r, http.StatusForbidden, "Not signed in", "The OpenID provider did not sign you in ("+truncate(e, 64)+"). "+again, Path+"/")
		return
	}
	// RFC 9207: an answer that names another issuer is a mix-up.
	if iss := q.Get("iss"); iss != "" && iss != o.Issuer {
		h.oidcMessage(w, r, http.StatusForbidden, "Not signed in", "The answer came from another provider than the one the console sent you to. "+again, Path+"/")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), oidcTimeout)
	defer cancel()
	p, ok := h.provider(ctx, w, r, o)
	if !ok {
		return
	}
	tok, err := oauthConfig(o, p).Exchange(context.WithValue(ctx, oauth2.HTTPClient, a.hc), q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		a.log.Warn("console: the OpenID provider refused the code", "issuer", o.Issuer, "error", exchangeError(err))
		h.oidcMessage(w, r, http.StatusBadGateway, "Not signed in", "The OpenID provider refused the console's request. "+again, Path+"/")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		a.log.Warn("console: the OpenID provider answered without an ID token", "issuer", o.Issuer)
		h.oidcMessage(w, r, http.StatusBadGateway, "Not signed in", "The OpenID provider answered without an ID token. "+again, Path+"/")
		return
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: o.ClientID, Now: a.now}).Verify(ctx, raw)
	if err == nil && subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		err = errors.New("the nonce does not match")
	}
	if err == nil && (idt.Subject == "" || len(idt.Subject) > maxSubject) {
		err = errors.New("the subject is empty or too long")
	}
	if err != nil {
		a.log.Warn("console: an ID token was refused", "issuer", o.Issuer, "error", truncate(err.Error(), 300))
		h.oidcMessage(w, r, http.StatusForbidden, "Not signed in", "The console could not verify the OpenID provider's answer. "+again, Path+"/")
		return
	}
	if !allowed(o, idt) {
		a.log.Warn("console: sign-in refused: not on the allow-list", "subject", idt.Subject)
		h.oidcMessage(w, r, http.StatusForbidden, "Not allowed", "You signed in as "+idt.Subject+", who may not read this console. admin.console.auth.oidc lists who may.", "")
		return
	}
	a.log.Info("console: signed in", "subject", idt.Subject)
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: a.sign(idt.Subject, a.now().Add(SessionTTL), o), Path: Path, MaxAge: int(SessionTTL.Seconds()),
		// Lax, not Strict: the browser arrives from the provider's site,
		// and a Strict cookie would not be sent on the redirect below.
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(o),
	})
	http.Redirect(w, r, safeNext(f.Next), http.StatusSeeOther)
}

// oidcLogout ends the session. It does not sign the reader out of the
// provider: the page says so, and does not start a sign-in by itself.
func (h *handler) oidcLogout(w http.ResponseWriter, r *http.Request, o *config.ConsoleOIDC) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !sameOrigin(r) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Path: Path, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(o)})
	h.oidcMessage(w, r, http.StatusOK, "Signed out", "You signed out of the console (not of your OpenID provider).", Path+"/")
}

// allowed reports whether the ID token's subject, or one of its groups,
// is on o's allow-list.
func allowed(o *config.ConsoleOIDC, idt *oidc.IDToken) bool {
	for _, s := range o.Subjects {
		if s == idt.Subject {
			return true
		}
	}
	if o.GroupsClaim == "" || len(o.Groups) == 0 {
		return false
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return false
	}
	for _, g := range groupsOf(claims, o.GroupsClaim) {
		for _, want := range o.Groups {
			if g == want {
				return true
			}
		}
	}
	return false
}

// groupsOf returns the groups in claim: a list of strings, or one string.
// A claim named exactly claim wins over the dotted path, so that
// namespaced claims ("https://example.com/groups") work too.
func groupsOf(claims map[string]any, claim string) []string {
	v, ok := claims[claim]
	if !ok {
		var cur any = claims
		for k := range strings.SplitSeq(claim, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[k]
		}
		v = cur
	}
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// sign returns a session cookie's value: the subject and its expiry,
// with their MAC.
func (a *oidcAuth) sign(sub string, exp time.Time, o *config.ConsoleOIDC) string {
	body := base64.RawURLEncoding.EncodeToString([]byte(sub)) + "." + strconv.FormatInt(exp.Unix(), 10)
	return body + "." + base64.RawURLEncoding.EncodeToString(a.mac(body, o))
}

func (a *oidcAuth) mac(body string, o *config.ConsoleOIDC) []byte {
	m := hmac.New(sha256.New, a.key)
	m.Write(fingerprint(o))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// session returns the subject of r's session cookie, if it is one this
// process signed under o and it has not expired.
func (a *oidcAuth) session(r *http.Request, o *config.ConsoleOIDC) (string, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return "", false
	}
	i := strings.LastIndexByte(c.Value, '.')
	if i < 0 {
		return "", false
	}
	body := c.Value[:i]
	sum, err := base64.RawURLEncoding.DecodeString(c.Value[i+1:])
	if err != nil || !hmac.Equal(sum, a.mac(body, o)) {
		return "", false
	}
	s, e, _ := strings.Cut(body, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || a.now().Unix() >= exp {
		return "", false
	}
	sub, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(sub) == 0 {
		return "", false
	}
	return string(sub), true
}

// seal returns f sealed for its cookie, bound to o.
func (a *oidcAuth) seal(f flow, o *config.ConsoleOIDC) string {
	plain, _ := json.Marshal(f)
	nonce := make([]byte, a.flow.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(a.flow.Seal(nonce, nonce, plain, fingerprint(o)))
}

// open returns the flow of r's cookie, if this process sealed it under o
// and it has not expired.
func (a *oidcAuth) open(r *http.Request, o *config.ConsoleOIDC) (*flow, error) {
	c, err := r.Cookie(flowCookie)
	if err != nil {
		return nil, errors.New("no sign-in cookie")
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(b) < a.flow.NonceSize() {
		return nil, errors.New("a malformed sign-in cookie")
	}
	n := a.flow.NonceSize()
	plain, err := a.flow.Open(nil, b[:n], b[n:], fingerprint(o))
	if err != nil {
		return nil, errors.New("a sign-in cookie of another process or config")
	}
	var f flow
	if err := json.Unmarshal(plain, &f); err != nil {
		return nil, errors.New("a malformed sign-in cookie")
	}
	if a.now().Unix() >= f.Expires {
		return nil, errors.New("an expired sign-in cookie")
	}
	return &f, nil
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// exchangeError describes a refused code redemption by its HTTP status and
// error code only: a provider is not trusted to keep the code or a token
// out of its error_description.
func exchangeError(err error) string {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return truncate(err.Error(), 300)
	}
	status := 0
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	code := re.ErrorCode
	if !registeredErrors[code] {
		code = "an unregistered error code"
	}
	return fmt.Sprintf("token request refused (HTTP %d): %s", status, code)
}

// registeredErrors are the error codes of a token endpoint (RFC 6749
// §5.2), the only ones logged as sent.
var registeredErrors = map[string]bool{
	"invalid_request": true, "invalid_client": true, "invalid_grant": true, "unauthorized_client": true,
	"unsupported_grant_type": true, "invalid_scope": true, "server_error": true, "temporarily_unavailable": true,
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
