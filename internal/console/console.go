// Package console serves the gateway's operator console on the
// admin listener: pages rendered on the server with html/template from
// embedded templates and one stylesheet, readable without JavaScript (a
// small script only refreshes the page's panels), under a strict
// Content-Security-Policy. It reads the gateway through a [Source] and
// changes nothing, but for one action an operator turns on: unlinking a
// user's upstream token on the vault page (see vault.go).
package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/explain"
)

// Path is where the console is mounted on the admin listener.
const Path = "/console"

// CSP is the Content-Security-Policy of every console response: nothing
// but the console's own stylesheet and script, no inline code, no frames,
// forms that post only to the console.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// CookieName is the cookie the sign-in form sets.
const CookieName = "mcpgw_console"

// AuditMax bounds the records one audit page shows.
const AuditMax = 500

// explainTimeout bounds the upstreams' answers on the tenants page.
const explainTimeout = 15 * time.Second

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Access is who may read the console, from the config in force.
type Access struct {
	// Loopback: requests that arrive on a loopback address, for a
	// loopback host name, are served without authentication.
	Loopback bool
	// Bearer, if not "", is the secret every request must show (and then
	// Loopback does not apply).
	Bearer string
	// OIDC, if not nil, signs readers in at an OpenID provider instead
	// (and then Bearer and Loopback do not apply).
	OIDC *config.ConsoleOIDC
	// VaultUnlink: the vault page lists the linked users and may unlink
	// them (admin.console.vault_unlink).
	VaultUnlink bool
}

// Options configure a Handler.
type Options struct {
	Source Source
	// Access is called for every request, so that a reload that changes
	// admin.console applies at once.
	Access func() Access
	Logger *slog.Logger
	// HTTPClient reaches the OpenID provider of Access.OIDC; nil means a
	// client of its own.
	HTTPClient *http.Client
}

type handler struct {
	src    Source
	access func() Access
	log    *slog.Logger
	pages  map[string]*template.Template
	mux    *http.ServeMux
	static http.Handler
	oidc   *oidcAuth
}

// New returns the console's handler: it serves the paths under [Path].
func New(opts Options) http.Handler {
	h := &handler{src: opts.Source, access: opts.Access, log: opts.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.oidc = newOIDCAuth(opts.HTTPClient, h.log)
	funcs := template.FuncMap{
		"since":  since,
		"when":   when,
		"join":   strings.Join,
		"lower":  strings.ToLower,
		"sorted": sortedKeys,
	}
	h.pages = map[string]*template.Template{}
	for _, p := range []string{"overview", "upstreams", "tenants", "budgets", "vault", "audit", "login", "off", "oidc"} {
		h.pages[p] = template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html"))
	}
	sub, _ := fs.Sub(staticFS, "static")
	h.static = http.StripPrefix(Path+"/static/", http.FileServerFS(sub))
	m := http.NewServeMux()
	m.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Path+"/", http.StatusSeeOther)
	})
	m.HandleFunc("GET "+Path+"/{$}", h.overview)
	m.HandleFunc("GET "+Path+"/upstreams", h.upstreams)
	m.HandleFunc("GET "+Path+"/tenants", h.tenants)
	m.HandleFunc("GET "+Path+"/budgets", h.budgets)
	m.HandleFunc("GET "+Path+"/vault", h.vault)
	m.HandleFunc("POST "+Path+"/vault/unlink", h.unlink)
	m.HandleFunc("GET "+Path+"/audit", h.audit)
	m.HandleFunc("POST "+Path+"/logout", h.logout)
	h.mux = m
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer a browser sends
	// "Origin: null" on the console's own form posts.
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	a := h.access()
	// The stylesheet and the script hold no data: the sign-in and
	// refusal pages use them too.
	if strings.HasPrefix(r.URL.Path, Path+"/static/") && (a.OIDC != nil || a.Bearer != "" || a.Loopback) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		h.static.ServeHTTP(w, r)
		return
	}
	switch {
	case a.OIDC != nil:
		var ok bool
		if r, ok = h.oidcGate(w, r, a.OIDC); !ok {
			return
		}
	case a.Bearer != "":
		if r.URL.Path == Path+"/login" {
			h.login(w, r, a)
			return
		}
		if !h.authorized(r, a.Bearer) {
			hd.Set("WWW-Authenticate", `Bearer realm="console"`)
			h.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Data: loginData{Next: r.URL.RequestURI()}})
			return
		}
	case a.Loopback:
		if !loopbackRequest(r) {
			h.render(w, r, http.StatusForbidden, "off", page{Title: "Console off", Data: "This console answers only requests that arrive on a loopback address, for localhost, 127.0.0.1 or [::1]; set admin.console.auth to read it from elsewhere."})
			return
		}
	default:
		h.render(w, r, http.StatusNotFound, "off", page{Title: "Console off", Data: "The console is off: server.admin_listen is not on a loopback address and admin.console.auth is not set."})
		return
	}
	if r.Method == http.MethodPost && !sameOrigin(r) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// loopbackRequest reports whether r arrived on a loopback address and
// names a loopback host: a page elsewhere that rebinds its own name to
// 127.0.0.1 still sends its own name as Host, and is refused.
func loopbackRequest(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || !config.LoopbackAddr(la.String()) {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return config.LoopbackHost(host)
}

// sameOrigin reports whether a POST comes from the console's own pages.
// A browser says where a request comes from in Sec-Fetch-Site, or else in
// Origin; a request with neither is not a browser's, and no page can
// have made it send one.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return s == "same-origin"
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	_, host, ok := strings.Cut(o, "://")
	return ok && host == r.Host
}

// authorized reports whether r shows the bearer, in its Authorization
// header or in the sign-in cookie.
func (h *handler) authorized(r *http.Request, bearer string) bool {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return equal(v, bearer)
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return equal(c.Value, cookieValue(bearer))
	}
	return false
}

// equal compares in constant time, whatever the lengths: their hashes
// have one length.
func equal(a, b string) bool {
	x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

// cookieValue is what the sign-in cookie holds: a MAC of a fixed text
// under the bearer, not the bearer itself, so that the cookie is worth
// nothing once the bearer changes and never reveals it.
func cookieValue(bearer string) string {
	m := hmac.New(sha256.New, []byte(bearer))
	m.Write([]byte("mcpgw console sign-in v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

type loginData struct {
	Next  string
	Error string
}

// login serves the sign-in form and checks what it posts.
func (h *handler) login(w http.ResponseWriter, r *http.Request, a Access) {
	next := safeNext(r.FormValue("next"))
	if r.Method != http.MethodPost {
		h.render(w, r, http.StatusOK, "login", page{Title: "Sign in", Data: loginData{Next: next}})
		return
	}
	if !sameOrigin(r) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	if !equal(r.PostFormValue("bearer"), a.Bearer) {
		h.log.Warn("console sign-in refused", "remote", r.RemoteAddr)
		h.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Data: loginData{Next: next, Error: "That is not the console's bearer."}})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: cookieValue(a.Bearer), Path: Path,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Path: Path, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, Path+"/", http.StatusSeeOther)
}

// safeNext keeps a page of the console to go to after signing in, and
// nothing else: no other path, host or scheme.
func safeNext(s string) string {
	if !strings.HasPrefix(s, Path+"/") || strings.HasPrefix(s, Path+"/login") || strings.ContainsAny(s, "\\\r\n") || strings.Contains(s, "//") {
		return Path + "/"
	}
	return s
}

// page is what the layout renders.
type page struct {
	Title string
	// Nav is the page's name in the navigation ("" for none).
	Nav     string
	Refresh bool // the script reloads its panels
	// SignOut: the reader signed in (a bearer or OIDC is configured).
	SignOut bool
	// User is who signed in with OIDC, "" for none.
	User string
	Data any
}

func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	a := h.access()
	p.SignOut = p.Nav != "" && (a.Bearer != "" || a.OIDC != nil)
	p.User = User(r.Context())
	var b strings.Builder
	if err := h.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		h.log.Error("console: rendering a page", "page", name, "error", err.Error())
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(b.String()))
	}
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Refresh: true, Data: h.src.Overview(r.Context())})
}

func (h *handler) upstreams(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "upstreams", page{Title: "Upstreams", Nav: "upstreams", Refresh: true, Data: h.src.Upstreams(r.Context())})
}

type tenantsData struct {
	Tenants, Issuers []string
	Tenant           string
	Report           *explain.Report
	Error            string
	// The claims preview: the form's values and what they give.
	Issuer, Claims string
	Preview        *Preview
	PreviewError   string
}

func (h *handler) tenants(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := tenantsData{Tenants: h.src.Tenants(), Issuers: h.src.Issuers(), Tenant: q.Get("tenant"), Issuer: q.Get("issuer"), Claims: q.Get("claims")}
	var claims map[string]any
	if d.Claims != "" {
		if err := json.Unmarshal([]byte(d.Claims), &claims); err != nil || claims == nil {
			d.PreviewError = "The claims must be one JSON object."
		} else if p, err := h.src.Preview(d.Issuer, claims); err != nil {
			d.PreviewError = err.Error()
		} else {
			d.Preview = &p
			if d.Tenant == "" && p.Known {
				d.Tenant = p.Tenant
			}
		}
	}
	if d.Tenant != "" {
		ctx, cancel := context.WithTimeout(r.Context(), explainTimeout)
		defer cancel()
		var as map[string]any
		if d.Preview != nil && d.Preview.Tenant == d.Tenant {
			as = claims
		}
		rep, err := h.src.Explain(ctx, d.Tenant, as)
		if err != nil {
			d.Error = err.Error()
		}
		d.Report = rep
	}
	h.render(w, r, http.StatusOK, "tenants", page{Title: "Tenants", Nav: "tenants", Data: d})
}

func (h *handler) budgets(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "budgets", page{Title: "Budgets", Nav: "budgets", Refresh: true, Data: h.src.Budgets(r.Context())})
}

type auditData struct {
	Filter   AuditFilter
	N        int
	Outcomes []string
	Tenants  []string
	Records  []audit.Record
}

func (h *handler) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := strconv.Atoi(q.Get("n"))
	if err != nil || n <= 0 {
		n = 100
	}
	n = min(n, AuditMax)
	d := auditData{
		Filter:   AuditFilter{Tenant: q.Get("tenant"), Outcome: q.Get("outcome")},
		N:        n,
		Outcomes: []string{audit.OutcomeOK, audit.OutcomeError, audit.OutcomeIsError, audit.OutcomeDenied},
		Tenants:  h.src.Tenants(),
	}
	d.Records = h.src.Audit(n, d.Filter)
	h.render(w, r, http.StatusOK, "audit", page{Title: "Audit", Nav: "audit", Refresh: true, Data: d})
}

// since formats how long ago t was, to the second.
func since(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Since(t).Round(time.Second).String()
}

// when formats t in UTC.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
