package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"

	"github.com/mcpgw/gateway/internal/config"
)

// Discovery of an upstream's authorization server (user_oauth without
// auth.issuer) goes where the upstream says, and the upstream is
// untrusted: a request the gateway makes there must not become one to a
// host the upstream could not reach itself (server-side request forgery).
// So, for a discovered server:
//
//   - no redirect is followed, of the upstream's answers or of any other;
//   - the protected resource metadata is fetched on the upstream's own
//     origin only, and must name the upstream as its resource (RFC 9728
//     §3.3, §7.3);
//   - the authorization server must be an issuer identifier: https,
//     without query or fragment (RFC 8414 §2), or plain http on the
//     upstream's own origin; and one of vault.discovered_issuers when that
//     is set (then it may be plain http, as listed);
//   - its metadata must name that issuer (RFC 8414 §3.3), and endpoints of
//     the same kind (https, or http on the issuer's own origin);
//   - every connection is checked as it is made, to the address it is made
//     to: a loopback, link-local or private address only when the
//     upstream itself is on one of that kind, or the issuer is listed.
//     Checking a name's addresses beforehand would not do: a name can
//     resolve to another address the second time (DNS rebinding).
//
// A server the config names (auth.issuer, vault.login) is the
// administrator's choice, and reached with the broker's own client.

// maxServers bounds the authorization_servers of the metadata looked at.
const maxServers = 8

// A discoveryError is why discovery refused where the upstream's metadata
// leads: said to the user as it is (it holds no URL, nothing of the
// upstream's).
type discoveryError string

func (e discoveryError) Error() string { return string(e) }

var (
	errRedirect = discoveryError("the upstream's metadata leads through a redirect, which discovery does not follow")
	errAddress  = discoveryError("the authorization server is on a loopback, link-local or private address, and the upstream is not")
)

// addrClass is a kind of address a discovered server may not be on
// unless the upstream is; 0 is a public address.
type addrClass uint8

const (
	classLoopback addrClass = 1 << iota
	classPrivate
	classLinkLocal
	classSpecial // unspecified, multicast, "this network": never a server's
	classAll     = classLoopback | classPrivate | classLinkLocal | classSpecial
)

var (
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598, carrier-grade NAT
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	nat64       = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: an IPv4 address inside
)

// classOf returns the kind of address a.
func classOf(a netip.Addr) addrClass {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		return classOf(netip.AddrFrom4([4]byte(b[12:])))
	}
	switch {
	case a.IsLoopback():
		return classLoopback
	case a.IsLinkLocalUnicast():
		return classLinkLocal
	case a.IsPrivate() || sharedSpace.Contains(a):
		return classPrivate
	case !a.IsGlobalUnicast() || thisNetwork.Contains(a):
		return classSpecial
	}
	return 0
}

// hostClasses returns the kinds of address rawURL's host is on: those of
// its literal address, or of every address its name resolves to now.
func hostClasses(ctx context.Context, rawURL string) addrClass {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		return classOf(a)
	}
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return classLoopback
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return 0
	}
	var c addrClass
	for _, a := range addrs {
		c |= classOf(a)
	}
	return c
}

// guarded returns a client of the broker's transport that follows no
// redirect and connects only to public addresses and those of the kinds
// allow: the check is in the dialer, on the address dialed. It connects
// directly (no proxy: the address checked must be the server's) and keeps
// no connection (one made under a looser allow must not serve another
// discovery). A transport that is not an *http.Transport (a test's) is
// used as it is.
func (b *Broker) guarded(allow addrClass) *http.Client {
	c := &http.Client{Timeout: b.hc.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect }}
	if c.Timeout == 0 {
		c.Timeout = fetchTimeout
	}
	var t *http.Transport
	switch rt := b.hc.Transport.(type) {
	case nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		t = rt.Clone()
	default:
		c.Transport = rt
		return c
	}
	d := &net.Dialer{Timeout: fetchTimeout, ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return errAddress
		}
		if k := classOf(ap.Addr()); k != 0 && allow&k == 0 {
			return errAddress
		}
		return nil
	}}
	t.Proxy, t.DialContext, t.DialTLSContext, t.DisableKeepAlives = nil, d.DialContext, nil, true
	c.Transport = t
	return c
}

// asConn is how the gateway reaches an upstream's authorization server.
type asConn struct {
	hc *http.Client
	// discovered says the server is the upstream's word, not the
	// config's: it is checked (see refuse and endpoint), and reached
	// with a guarded client.
	discovered bool
	upstream   string          // the upstream's URL
	listed     map[string]bool // vault.discovered_issuers, without trailing slash; nil: any
}

// conn returns how upstream u, with auth a, reaches its authorization
// server: the configured one with the broker's client, a discovered one
// with a guarded client that may reach the kinds of address the upstream
// is on (any, for an issuer listed in vault.discovered_issuers: see
// forIssuer).
func (b *Broker) conn(ctx context.Context, st *brokerState, u *config.Upstream, a *config.UpstreamAuth) asConn {
	if a.Issuer != "" {
		return asConn{hc: b.hc}
	}
	c := asConn{discovered: true, upstream: u.URL, hc: b.guarded(hostClasses(ctx, u.URL))}
	if l := st.cfg.Vault.DiscoveredIssuers; len(l) > 0 {
		c.listed = make(map[string]bool, len(l))
		for _, iss := range l {
			c.listed[strings.TrimSuffix(iss, "/")] = true
		}
	}
	return c
}

// forIssuer returns c for reaching issuer, which c accepts: an issuer the
// administrator listed may be on any address.
func (b *Broker) forIssuer(c asConn, issuer string) asConn {
	if c.discovered && c.listed != nil && c.listed[strings.TrimSuffix(issuer, "/")] {
		c.hc = b.guarded(classAll)
	}
	return c
}

// refuse says why c does not accept issuer as the authorization server,
// nil if it does.
func (c asConn) refuse(issuer string) error {
	if !c.discovered {
		return nil
	}
	p, err := url.Parse(issuer)
	switch {
	case err != nil || p.Host == "" || p.User != nil || p.Opaque != "":
		return discoveryError("the upstream names an authorization server that is not an issuer identifier")
	case p.RawQuery != "" || p.ForceQuery || p.Fragment != "" || strings.Contains(issuer, "#"):
		return discoveryError("the upstream names an authorization server with a query or fragment, which an issuer identifier has not (RFC 8414 §2)")
	case c.listed != nil && !c.listed[strings.TrimSuffix(issuer, "/")]:
		return discoveryError("the upstream names an authorization server that is not one of vault.discovered_issuers")
	case p.Scheme != "https" && !(p.Scheme == "http" && (sameOrigin(issuer, c.upstream) || c.listed != nil)):
		// Plain http only on the upstream's own origin, or listed by
		// the administrator.
		return discoveryError("the upstream names an authorization server that is not https")
	}
	return nil
}

// endpoint reports whether c accepts e as an endpoint of issuer's:
// https, or http on the issuer's own origin (itself accepted), without
// fragment (RFC 6749 §3.1, §3.2). Empty is accepted (none).
func (c asConn) endpoint(issuer, e string) bool {
	if !c.discovered || e == "" {
		return true
	}
	p, err := url.Parse(e)
	return err == nil && p.Host != "" && p.User == nil && p.Fragment == "" && !strings.Contains(e, "#") &&
		(p.Scheme == "https" || p.Scheme == "http" && sameOrigin(e, issuer))
}

// issuerOf returns the authorization server of upstream u: the
// configured issuer, or the first acceptable one the upstream's protected
// resource metadata (RFC 9728) names, found from its 401 answer's
// WWW-Authenticate resource_metadata, else at its well-known URLs
// (2025-11-25 basic/authorization, "Protected Resource Metadata Discovery
// Requirements").
func (b *Broker) issuerOf(ctx context.Context, c asConn, u *config.Upstream, a *config.UpstreamAuth) (string, error) {
	if a.Issuer != "" {
		return a.Issuer, nil
	}
	type candidate struct {
		url  string
		root bool // at the origin's root: its resource may be the origin
	}
	var candidates []candidate
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.URL, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
	if err != nil {
		return "", errors.New("invalid upstream URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := c.hc.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized {
			if m := resourceMetadataParam(resp.Header.Values("WWW-Authenticate")); m != "" {
				mu, err := url.Parse(m)
				candidates = append(candidates, candidate{m, err == nil && strings.TrimSuffix(mu.Path, "/") == "/.well-known/oauth-protected-resource"})
			}
		}
	}
	pu, err := url.Parse(u.URL)
	if err != nil {
		return "", errors.New("invalid upstream URL")
	}
	path := strings.TrimSuffix(pu.Path, "/")
	pu.RawQuery, pu.Fragment = "", ""
	pu.Path = "/.well-known/oauth-protected-resource" + path
	candidates = append(candidates, candidate{pu.String(), path == ""})
	pu.Path = "/.well-known/oauth-protected-resource"
	candidates = append(candidates, candidate{pu.String(), true})
	origin := pu.Scheme + "://" + pu.Host

	var refused error
	for _, cand := range candidates {
		if !sameOrigin(cand.url, u.URL) {
			// A metadata URL on another host is not the upstream's word.
			continue
		}
		var prm struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		if err := getJSON(ctx, c.hc, cand.url, &prm); err != nil {
			if errors.Is(err, errRedirect) {
				refused = errRedirect
			}
			continue
		}
		// The metadata is the upstream's only when it names the
		// upstream (RFC 9728 §3.3: else it must not be used).
		res := strings.TrimSuffix(prm.Resource, "/")
		if res == "" || res != strings.TrimSuffix(u.URL, "/") && res != strings.TrimSuffix(a.Resource, "/") && !(cand.root && res == origin) {
			refused = discoveryError("the upstream's protected resource metadata names another resource")
			continue
		}
		for _, s := range prm.AuthorizationServers[:min(len(prm.AuthorizationServers), maxServers)] {
			if err := c.refuse(s); err != nil {
				refused = err
				continue
			}
			return s, nil
		}
	}
	if refused != nil {
		return "", refused
	}
	return "", errors.New("no issuer configured, and the upstream publishes no protected resource metadata")
}

func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Scheme == ub.Scheme && strings.EqualFold(ua.Host, ub.Host)
}

// resourceMetadataParam returns the resource_metadata parameter of a
// Bearer challenge (RFC 9728 §5.1), "" if none.
func resourceMetadataParam(values []string) string {
	for _, v := range values {
		i := strings.Index(v, "resource_metadata=")
		if i < 0 {
			continue
		}
		rest := v[i+len("resource_metadata="):]
		if strings.HasPrefix(rest, `"`) {
			if j := strings.Index(rest[1:], `"`); j >= 0 {
				return rest[1 : 1+j]
			}
			continue
		}
		if j := strings.IndexAny(rest, ", "); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	return ""
}

// getJSON decodes the JSON document at u, fetched with hc: an error
// unless it answers 200.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		// Said without the URL (*url.Error quotes it): the cause, or
		// what discovery refused.
		var r discoveryError
		if errors.As(err, &r) {
			return r
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// metadata returns issuer's metadata, fetched by discovery through c and
// kept for metaTTL.
func (b *Broker) metadata(ctx context.Context, c asConn, issuer string) (*asMeta, error) {
	if err := c.refuse(issuer); err != nil {
		return nil, err
	}
	key := issuer
	if c.discovered {
		key = "discovered " + issuer
	}
	b.mu.Lock()
	m := b.meta[key]
	b.mu.Unlock()
	if m != nil && b.now().Sub(m.fetched) < metaTTL {
		return m, nil
	}
	base := strings.TrimSuffix(issuer, "/")
	var refused error
	for _, u := range discoveryURLs(base) {
		var md asMeta
		if err := getJSON(ctx, c.hc, u, &md); err != nil {
			if r := discoveryError(""); errors.As(err, &r) {
				refused = r
			}
			continue
		}
		// RFC 8414 §3.3: the issuer must be the one asked for.
		if strings.TrimSuffix(md.Issuer, "/") != base || md.AuthorizationEndpoint == "" || md.TokenEndpoint == "" {
			return nil, errors.New("discovery: the metadata names another issuer, or lacks an endpoint")
		}
		if !c.endpoint(issuer, md.AuthorizationEndpoint) || !c.endpoint(issuer, md.TokenEndpoint) || !c.endpoint(issuer, md.RevocationEndpoint) {
			return nil, discoveryError("the authorization server's metadata names an endpoint that is not https")
		}
		md.fetched = b.now()
		b.mu.Lock()
		if len(b.meta) >= maxMeta {
			clear(b.meta)
		}
		b.meta[key] = &md
		b.mu.Unlock()
		return &md, nil
	}
	if refused != nil {
		return nil, refused
	}
	return nil, errors.New("discovery: no authorization server metadata at the issuer")
}
