package credentials

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/vault"
)

// The consent flow, on the public listener (see docs/user-oauth.md):
//
//	GET  /oauth/consent?id=…   the page: whom (the gateway identity) is
//	                           linked to what (the upstream), a form to
//	                           confirm, with a CSRF token bound to a cookie
//	POST /oauth/consent        confirmed: the link's consent is used up, an
//	                           authorization starts (state, PKCE S256) and
//	                           the browser goes to the authorization server
//	GET  /oauth/callback       the authorization server's answer: the state
//	                           is used up, the code redeemed with the PKCE
//	                           verifier, the tokens stored for the principal
//	                           the consent was made for
//
// Nothing a browser sends chooses the principal: it comes from the pending
// consent, which only the principal's own request created.

const (
	// formTimeout bounds the reading of a confirmation's body.
	formTimeout = 10 * time.Second
	csrfCookie  = "mcpgw_consent"
	// stateCookie binds an authorization to the browser that confirmed
	// it (RFC 6749 §10.12): a callback from another browser, with a state
	// it was sent by someone else, is refused.
	stateCookie = "mcpgw_state"
)

var pages = template.Must(template.New("").Parse(`
{{define "head"}}<!doctype html><html><head><meta charset="utf-8"><title>{{.Title}}</title></head><body>{{end}}
{{define "consent"}}{{template "head" .}}
<h1>Link your account at {{.Upstream}}</h1>
<p>The MCP gateway asks for access to the upstream <strong>{{.Upstream}}</strong>, to act there as you.</p>
<p>The account you sign in with at the authorization server <strong>{{.AS}}</strong> will be linked to this gateway identity:</p>
<ul><li>subject: <strong id="subject">{{.Subject}}</strong></li><li>tenant: <strong id="tenant">{{.Tenant}}</strong></li><li>issuer: <strong id="issuer">{{.Issuer}}</strong></li></ul>
<p>Continue only if this is you, and you asked for this from your own MCP client just now. If someone sent you this link, close this page.</p>
<form method="post" action="{{.Action}}"><input type="hidden" name="id" value="{{.ID}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" name="confirm" value="yes">Continue to {{.AS}}</button></form>
</body></html>{{end}}
{{define "message"}}{{template "head" .}}<h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>{{end}}
`))

// Handler serves the consent page and the callback.
func (b *Broker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ConsentPath, b.consentPage)
	mux.HandleFunc("POST "+ConsentPath, b.confirm)
	mux.HandleFunc("GET "+CallbackPath, b.callback)
	return secureHeaders(limitQuery(mux))
}

// secureHeaders keeps the pages out of frames (clickjacking of the
// confirmation), out of caches and out of referrers.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; form-action 'self' https: http:")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

func limitQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.RawQuery) > maxQueryBytes {
			http.Error(w, "request URI too long", http.StatusRequestURITooLong)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func message(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = pages.ExecuteTemplate(w, "message", map[string]string{"Title": title, "Text": text})
}

const gone = "This link is unknown, has expired or was used already. Retry the call from your MCP client to get a new one."

func (b *Broker) consentPage(w http.ResponseWriter, r *http.Request) {
	st := b.cur.Load()
	if st.vault == nil {
		http.NotFound(w, r)
		return
	}
	p, err := st.vault.Peek(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		b.notFound(w, err)
		return
	}
	_, a := st.auth(p.Upstream, p.Tenant)
	if a == nil {
		message(w, http.StatusNotFound, "Link not usable", gone)
		return
	}
	asName := a.Issuer
	if asName == "" {
		asName = "the upstream's authorization server"
	} else if pu, err := url.Parse(a.Issuer); err == nil {
		asName = pu.Host
	}
	csrf := randomToken()
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: csrf, Path: ConsentPath, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: strings.HasPrefix(st.origin, "https:"), MaxAge: int(st.cfg.Vault.ConsentTTL.D().Seconds()),
	})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = pages.ExecuteTemplate(w, "consent", map[string]string{
		"Title": "Link " + p.Upstream, "Upstream": p.Upstream, "AS": asName,
		// The principal's issuer, not p.Issuer (the authorization server
		// an authorization went to, empty for a link).
		"Subject": p.Subject, "Tenant": p.Tenant, "Issuer": p.Principal.Issuer,
		"Action": ConsentPath, "ID": p.ID, "CSRF": csrf,
	})
}

func (b *Broker) notFound(w http.ResponseWriter, err error) {
	if errors.Is(err, vault.ErrNotFound) {
		message(w, http.StatusNotFound, "Link not usable", gone)
		return
	}
	message(w, http.StatusServiceUnavailable, "Try again", "The gateway cannot reach its token store; try again later.")
}

func randomToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sameSite reports whether a POST comes from the gateway's own page: the
// Fetch Metadata and Origin a browser sends, when it sends them.
func sameSite(r *http.Request, origin string) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	o := r.Header.Get("Origin")
	return o == "" || o == "null" && origin == "" || strings.EqualFold(o, origin)
}

func (b *Broker) confirm(w http.ResponseWriter, r *http.Request) {
	st := b.cur.Load()
	if st.vault == nil {
		http.NotFound(w, r)
		return
	}
	// A small body, read within formTimeout: a slow one does not hold
	// the connection.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(formTimeout))
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			message(w, http.StatusRequestEntityTooLarge, "Request too large", "The form is larger than the gateway accepts.")
			return
		}
		message(w, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return
	}
	c, err := r.Cookie(csrfCookie)
	csrf := r.PostForm.Get("csrf")
	if err != nil || csrf == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(csrf)) != 1 || !sameSite(r, st.origin) {
		message(w, http.StatusForbidden, "Not confirmed", "This confirmation did not come from the gateway's consent page. Open the link again.")
		return
	}
	p, err := st.vault.Take(r.Context(), r.PostForm.Get("id"))
	if err != nil {
		b.notFound(w, err)
		return
	}
	if l := st.cfg.Vault.Login; l != nil {
		b.startLogin(w, r, st, p, l)
		return
	}
	b.startAuthorization(w, r, st, p)
}

// startLogin sends the browser to sign in at the gateway's own
// authorization server, so that the callback can check that the person is
// the principal p was made for (2025-11-25 client/elicitation,
// "Phishing").
func (b *Broker) startLogin(w http.ResponseWriter, r *http.Request, st *brokerState, p *vault.Pending, l *config.VaultLogin) {
	ctx, cancel := context.WithTimeout(r.Context(), fetchTimeout)
	defer cancel()
	meta, err := b.metadata(ctx, asConn{hc: b.hc}, l.Issuer)
	if err != nil {
		b.log.Warn("user_oauth: the login issuer's discovery", "error", err)
		message(w, http.StatusBadGateway, "Sign-in unavailable", "The gateway could not reach its own authorization server. Try again later.")
		return
	}
	verifier, browser := oauth2.GenerateVerifier(), randomToken()
	next := *p
	next.Login, next.Verifier, next.Browser, next.Issuer = true, verifier, browser, meta.Issuer
	next.Expires = b.now().Add(st.cfg.Vault.ConsentTTL.D())
	if next.Elicitation == "" {
		next.Elicitation = p.ID
	}
	state, err := st.vault.Begin(r.Context(), &next)
	if err != nil {
		b.notFound(w, err)
		return
	}
	b.setStateCookie(w, st, browser)
	conf := loginConfig(st, l, meta)
	http.Redirect(w, r, conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("resource", st.cfg.Server.PublicURL)), http.StatusSeeOther)
}

func loginConfig(st *brokerState, l *config.VaultLogin, meta *asMeta) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if l.ClientSecret == "" {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID: l.ClientID, ClientSecret: l.ClientSecret, Scopes: l.Scopes, RedirectURL: st.redirectURI(),
		Endpoint: oauth2.Endpoint{AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint, AuthStyle: style},
	}
}

// finishLogin redeems the sign-in's code, verifies the token as the
// gateway verifies its clients' and, when it stands for the principal p
// was made for, goes on to the upstream's authorization.
func (b *Broker) finishLogin(w http.ResponseWriter, r *http.Request, st *brokerState, p *vault.Pending) {
	l, fn := st.cfg.Vault.Login, b.verify.Load()
	if l == nil || fn == nil {
		message(w, http.StatusNotFound, "Link not usable", gone)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), fetchTimeout)
	defer cancel()
	q := r.URL.Query()
	meta, ok := b.answerMeta(ctx, w, q, asConn{hc: b.hc}, p.Issuer, "Sign-in unavailable", "Not signed in")
	if !ok {
		return
	}
	tok, err := loginConfig(st, l, meta).Exchange(context.WithValue(ctx, oauth2.HTTPClient, b.hc), q.Get("code"),
		oauth2.VerifierOption(p.Verifier), oauth2.SetAuthURLParam("resource", st.cfg.Server.PublicURL))
	if err != nil {
		b.log.Info("user_oauth: sign-in code redemption failed", "error", oauthError(err, q.Get("code"), p.Verifier, l.ClientSecret))
		message(w, http.StatusBadGateway, "Not signed in", "The gateway's authorization server refused the sign-in. Retry the call to start again.")
		return
	}
	who, err := (*fn)(ctx, tok.AccessToken)
	if err != nil {
		message(w, http.StatusForbidden, "Not signed in", "The gateway could not verify who signed in. Retry the call to start again.")
		return
	}
	if who != p.Principal {
		b.log.Warn("user_oauth: a consent link was opened by another principal than the one it was made for", "upstream", p.Upstream)
		message(w, http.StatusForbidden, "Not your link", "You signed in as "+who.Subject+" (tenant "+who.Tenant+"), but this link was made for someone else. Nothing was linked. Use only links your own MCP client gave you.")
		return
	}
	link := *p
	link.Login, link.Verifier, link.Browser, link.Issuer = false, "", "", ""
	b.startAuthorization(w, r, st, &link)
}

// answerMeta returns the metadata of authorization server issuer, reached
// through c, to which the gateway sent the browser whose answer's query
// is q. It reports false, having told the browser (pages titled
// unavailable or refused), when the metadata cannot be had or the answer
// names another server (RFC 9207: a mix-up).
func (b *Broker) answerMeta(ctx context.Context, w http.ResponseWriter, q url.Values, c asConn, issuer, unavailable, refused string) (*asMeta, bool) {
	meta, err := b.metadata(ctx, c, issuer)
	if err != nil {
		message(w, http.StatusBadGateway, unavailable, "Try again later.")
		return nil, false
	}
	if iss := q.Get("iss"); iss != "" && strings.TrimSuffix(iss, "/") != strings.TrimSuffix(meta.Issuer, "/") {
		message(w, http.StatusForbidden, refused, "The answer came from another authorization server than the one the gateway sent you to.")
		return nil, false
	}
	return meta, true
}

// startAuthorization sends the browser to the upstream's authorization
// server, for the consent p.
func (b *Broker) startAuthorization(w http.ResponseWriter, r *http.Request, st *brokerState, p *vault.Pending) {
	u, a := st.auth(p.Upstream, p.Tenant)
	if a == nil {
		message(w, http.StatusNotFound, "Link not usable", gone)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), fetchTimeout)
	defer cancel()
	c := b.conn(ctx, st, u, a)
	issuer, err := b.issuerOf(ctx, c, u, a)
	var meta *asMeta
	if err == nil {
		meta, err = b.metadata(ctx, b.forIssuer(c, issuer), issuer)
	}
	if err != nil {
		b.log.Warn("user_oauth: authorization server discovery", "upstream", p.Upstream, "error", err)
		var de discoveryError
		if errors.As(err, &de) {
			// Refused, not unavailable: trying again does not help.
			message(w, http.StatusBadGateway, "Authorization server refused", "The gateway does not accept the authorization server the upstream "+p.Upstream+" leads to: "+de.Error()+". Nothing was linked. Tell an administrator.")
			return
		}
		message(w, http.StatusBadGateway, "Authorization server unavailable", "The gateway could not find the upstream's authorization server. Try again later.")
		return
	}
	// PKCE S256 always (2025-11-25 basic/authorization, "Authorization
	// Code Protection"); an authorization server that does not list it is
	// refused rather than downgraded.
	if len(meta.PKCEMethods) > 0 && !contains(meta.PKCEMethods, "S256") {
		message(w, http.StatusBadGateway, "Authorization server unsuitable", "The upstream's authorization server does not support PKCE with S256.")
		return
	}
	verifier := oauth2.GenerateVerifier()
	browser := randomToken()
	next := &vault.Pending{Principal: p.Principal, Upstream: p.Upstream, Elicitation: p.ID, Session: p.Session,
		Verifier: verifier, Browser: browser, Issuer: meta.Issuer, Expires: b.now().Add(st.cfg.Vault.ConsentTTL.D())}
	if p.Elicitation != "" {
		next.Elicitation = p.Elicitation
	}
	state, err := st.vault.Begin(r.Context(), next)
	if err != nil {
		b.notFound(w, err)
		return
	}
	b.setStateCookie(w, st, browser)
	conf := b.oauthConfig(st, a, meta)
	to := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource(u, a)))
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// setStateCookie binds the authorization about to start to this browser.
func (b *Broker) setStateCookie(w http.ResponseWriter, st *brokerState, browser string) {
	http.SetCookie(w, &http.Cookie{
		Name: stateCookie, Value: browser, Path: CallbackPath, HttpOnly: true,
		// Lax: the callback is a top-level navigation from the
		// authorization server's site.
		SameSite: http.SameSiteLaxMode, Secure: strings.HasPrefix(st.origin, "https:"), MaxAge: int(st.cfg.Vault.ConsentTTL.D().Seconds()),
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (b *Broker) callback(w http.ResponseWriter, r *http.Request) {
	st := b.cur.Load()
	if st.vault == nil {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	p, err := st.vault.Take(r.Context(), q.Get("state"))
	if err != nil || p.Verifier == "" {
		// A consent link's id is no state: only a confirmed consent
		// (with its verifier) is.
		if err == nil {
			err = vault.ErrNotFound
		}
		b.notFound(w, err)
		return
	}
	if c, err := r.Cookie(stateCookie); err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(p.Browser)) != 1 {
		// Used up all the same: a state is tried once.
		message(w, http.StatusForbidden, "Not linked", "This answer does not belong to the browser that confirmed the consent. Retry the call from your MCP client to start again.")
		return
	}
	if e := q.Get("error"); e != "" {
		message(w, http.StatusForbidden, "Not linked", "The authorization server did not grant access ("+truncate(e, 64)+"). Retry the call to start again.")
		return
	}
	if p.Login {
		b.finishLogin(w, r, st, p)
		return
	}
	u, a := st.auth(p.Upstream, p.Tenant)
	if a == nil {
		message(w, http.StatusNotFound, "Link not usable", gone)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), fetchTimeout)
	defer cancel()
	c := b.forIssuer(b.conn(ctx, st, u, a), p.Issuer)
	meta, ok := b.answerMeta(ctx, w, q, c, p.Issuer, "Authorization server unavailable", "Not linked")
	if !ok {
		return
	}
	conf := b.oauthConfig(st, a, meta)
	tok, err := conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, c.hc), q.Get("code"),
		oauth2.VerifierOption(p.Verifier), oauth2.SetAuthURLParam("resource", resource(u, a)))
	b.fetched(p.Upstream, err)
	if err != nil {
		b.log.Info("user_oauth: code redemption failed", "upstream", p.Upstream, "error", oauthError(err, q.Get("code"), p.Verifier, a.ClientSecret))
		message(w, http.StatusBadGateway, "Not linked", "The authorization server refused the gateway's request. Retry the call to start again.")
		return
	}
	k := vault.Key{Principal: p.Principal, Upstream: p.Upstream}
	switch err := st.vault.Save(r.Context(), k, b.fromOAuth(tok, meta.Issuer)); {
	case errors.Is(err, vault.ErrFull):
		message(w, http.StatusInsufficientStorage, "Not linked", "The gateway holds as many tokens for your tenant as it may. Ask an administrator.")
		return
	case err != nil:
		b.notFound(w, err)
		return
	}
	b.mu.Lock()
	delete(b.stale, k.String())
	b.mu.Unlock()
	if fn := b.linked.Load(); fn != nil {
		(*fn)(context.WithoutCancel(r.Context()), p.Upstream, p.Session, p.Elicitation)
	}
	message(w, http.StatusOK, "Linked", "Your account at "+p.Upstream+" is linked to "+p.Subject+" (tenant "+p.Tenant+"). Return to your MCP client and retry.")
}
