package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpgw/gateway/internal/protocol"
)

// maxNameLen bounds upstream names and prefixes, which end up in every
// namespaced tool, prompt and resource name.
const maxNameLen = 32

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9-]+$`)
	prefixRE = regexp.MustCompile(`^[a-z0-9-]*$`)
)

// Validate reports every problem with c as a [Problems] error, or returns
// nil. It is for configs built in code: [Parse] and [Load] already validate,
// and report positions that Validate cannot (its problems have no line).
//
// Settings at their zero value count as unset, so Validate accepts c both
// before and after [Config.ApplyDefaults]. Negative sizes and durations are
// errors.
//
// Validate reads the files of the upstreams' tls sections (see
// [UpstreamTLS.Load]) and records their fingerprints (see
// [UpstreamTLS.Fingerprint]). It also sets c.Warnings, so it must not run
// while c is shared.
// Warnings are a cheap heuristic for likely mistakes, not a proof; they
// cover:
//   - in a tenant's rules, an allow pattern that can never match because
//     deny repeats it, or deny holds "*" (which matches every name without
//     a "/"; patterns with a "/" or a "[...]" class are left alone), or it
//     is a literal name that a deny pattern matches;
//   - a tools pattern containing "/" (as in "://"): tool names have none,
//     so it was probably meant for resources;
//   - a required_scopes or annotations entry for a tool that no tools.allow
//     pattern matches (when allow is set) or that a tools.deny pattern
//     matches: the tenant never sees that tool;
//   - a sessions.redis section in the file while sessions.store is not
//     redis;
//   - a telemetry.tracing section with settings in the file while
//     telemetry.tracing.enabled is not true, and a tracing endpoint whose
//     path already ends in /v1/traces (the gateway appends it);
//   - telemetry.pprof in the file without server.admin_listen;
//   - an upstream with auth mode user_oauth, a client secret and no
//     issuer (the upstream's metadata would choose where the secret goes).
func (c *Config) Validate() error {
	v := &validator{file: c.Path}
	v.config(c)
	c.Warnings = v.sortedWarnings()
	return v.problems.err()
}

// A validator checks the rules that apply to a Config however it was made.
type validator struct {
	file string
	// pos holds positions by path; nil for a config built in code.
	pos map[string]position
	// skip holds paths the decoder failed to decode; problems at them or
	// inside them are not reported again.
	skip     map[string]bool
	problems Problems
	warnings Problems
}

// addf reports a problem at path, positioned at path or, when path itself
// has no recorded position (a missing key), at its closest ancestor that
// has one.
func (v *validator) addf(path, format string, args ...any) {
	v.addAtf(v.find(path), path, format, args...)
}

// addAtf reports a problem at path, positioned at pos.
func (v *validator) addAtf(pos position, path, format string, args ...any) {
	v.report(&v.problems, pos, path, format, args...)
}

// warnf reports a warning at path, positioned like addf's problems.
func (v *validator) warnf(path, format string, args ...any) {
	v.report(&v.warnings, v.find(path), path, format, args...)
}

func (v *validator) report(to *Problems, pos position, path, format string, args ...any) {
	if v.skipped(path) {
		return
	}
	*to = append(*to, Problem{
		File: v.file, Line: pos.line, Col: pos.col, Path: path,
		Msg: fmt.Sprintf(format, args...),
	})
}

// sortedWarnings returns the warnings sorted by line, or nil.
func (v *validator) sortedWarnings() []Problem {
	if len(v.warnings) == 0 {
		return nil
	}
	v.warnings.sort()
	return v.warnings
}

func (v *validator) find(path string) position {
	for {
		if pos, ok := v.pos[path]; ok {
			return pos
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return position{}
		}
		path = path[:i]
	}
}

// skipped reports whether path or one of its ancestors failed to decode.
func (v *validator) skipped(path string) bool {
	if len(v.skip) == 0 {
		return false
	}
	for {
		if v.skip[path] {
			return true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return v.skip[""]
		}
		path = path[:i]
	}
}

func (v *validator) config(c *Config) {
	v.server(&c.Server)
	v.sessions(&c.Sessions)
	v.upstreams(c.Upstreams)
	v.auth(c)
	v.tenants(c)
	v.policy(c)
	v.guards(c)
	v.limits(&c.Limits)
	v.budgets(c)
	v.pins(c)
	v.telemetry(c)
	nonNegative(v, "identity.token_ttl", c.Identity.TokenTTL)
	v.vault(c)
	v.admin(c)
}

func (v *validator) limits(l *Limits) {
	nonNegative(v, "limits.streams_per_principal", l.StreamsPerPrincipal)
	nonNegative(v, "limits.streams_per_tenant", l.StreamsPerTenant)
	nonNegative(v, "limits.batch_messages", l.BatchMessages)
	nonNegative(v, "limits.client_info_bytes", l.ClientInfoBytes)
	nonNegative(v, "limits.client_capabilities_bytes", l.ClientCapabilitiesBytes)
	nonNegative(v, "limits.parked_calls_per_principal", l.ParkedCallsPerPrincipal)
	nonNegative(v, "limits.detached_calls_per_principal", l.DetachedCallsPerPrincipal)
	nonNegative(v, "limits.list_pages", l.ListPages)
	nonNegative(v, "limits.list_bytes", l.ListBytes)
	nonNegative(v, "limits.upstream_streams", l.UpstreamStreams)
	nonNegative(v, "limits.upstream_streams_per_principal", l.UpstreamStreamsPerPrincipal)
	nonNegative(v, "limits.upstream_streams_per_tenant", l.UpstreamStreamsPerTenant)
	nonNegative(v, "limits.detached_calls_per_tenant", l.DetachedCallsPerTenant)
	nonNegative(v, "limits.detached_calls", l.DetachedCalls)
}

func (v *validator) server(s *Server) {
	if s.Listen != "" {
		v.listenAddr("server.listen", s.Listen)
	}
	if s.AdminListen != "" {
		v.listenAddr("server.admin_listen", s.AdminListen)
		if s.AdminListen == cmp.Or(s.Listen, DefaultListen) && !strings.HasSuffix(s.AdminListen, ":0") {
			v.addf("server.admin_listen", "must differ from server.listen")
		}
	}
	if s.PublicURL != "" {
		v.httpURL("server.public_url", s.PublicURL)
	}
	for i, o := range s.AllowedOrigins {
		if !isOrigin(o) {
			v.addf(fmt.Sprintf("server.allowed_origins[%d]", i),
				`%q is not an origin: want scheme://host[:port], such as "https://app.example.com"`, o)
		}
	}
	nonNegative(v, "server.max_body_bytes", s.MaxBodyBytes)
	nonNegative(v, "server.request_timeout", s.RequestTimeout)
	nonNegative(v, "server.read_header_timeout", s.ReadHeaderTimeout)
	nonNegative(v, "server.read_body_timeout", s.ReadBodyTimeout)
	nonNegative(v, "server.list_cache_ttl", s.ListCacheTTL)
	nonNegative(v, "server.shutdown_grace", s.ShutdownGrace)
	if s.DrainDelay != nil {
		nonNegative(v, "server.drain_delay", *s.DrainDelay)
		// The grace spans the delay: a delay as long leaves in-flight
		// requests no time to finish.
		if grace := cmp.Or(s.ShutdownGrace, Duration(DefaultShutdownGrace)); grace > 0 && *s.DrainDelay >= grace {
			v.addf("server.drain_delay", "must be shorter than server.shutdown_grace (%v)", grace.D())
		}
	}
}

func (v *validator) sessions(s *Sessions) {
	switch s.Store {
	case "", StoreMemory:
		// Only a section written in the file, with settings in it: a
		// code-built config has its Redis settings defaulted whatever the
		// store.
		if _, ok := v.pos["sessions.redis"]; ok && !s.Redis.isZero() {
			v.warnf("sessions.redis", "is ignored: sessions.store is not %q", StoreRedis)
		}
	case StoreRedis:
	default:
		v.addf("sessions.store", "unknown store %q: must be %q or %q", s.Store, StoreMemory, StoreRedis)
	}
	nonNegative(v, "sessions.idle_ttl", s.IdleTTL)
	nonNegative(v, "sessions.max_sessions", s.MaxSessions)
	nonNegative(v, "sessions.max_per_principal", s.MaxPerPrincipal)
	nonNegative(v, "sessions.max_per_tenant", s.MaxPerTenant)
	nonNegative(v, "sessions.mailbox_messages", s.MailboxMessages)
	nonNegative(v, "sessions.mailbox_bytes", s.MailboxBytes)
	nonNegative(v, "sessions.tasks.max_per_principal", s.Tasks.MaxPerPrincipal)
	nonNegative(v, "sessions.tasks.max_per_tenant", s.Tasks.MaxPerTenant)
	nonNegative(v, "sessions.tasks.max_tasks", s.Tasks.MaxTasks)
	nonNegative(v, "sessions.tasks.max_ttl", s.Tasks.MaxTTL)
	nonNegative(v, "sessions.tasks.list_page_size", s.Tasks.ListPageSize)
	if s.Tasks.ListPageSize > maxTaskListPage {
		v.addf("sessions.tasks.list_page_size", "must be at most %d", maxTaskListPage)
	}
	ev := &s.Events
	nonNegative(v, "sessions.events.per_stream", ev.PerStream)
	nonNegative(v, "sessions.events.bytes_per_stream", ev.BytesPerStream)
	nonNegative(v, "sessions.events.ttl", ev.TTL)
	nonNegative(v, "sessions.events.streams_per_session", ev.StreamsPerSession)
	nonNegative(v, "sessions.events.max_streams", ev.MaxStreams)
	nonNegative(v, "sessions.events.max_bytes", ev.MaxBytes)
	nonNegative(v, "sessions.events.max_streams_per_principal", ev.MaxStreamsPerPrincipal)
	nonNegative(v, "sessions.events.max_streams_per_tenant", ev.MaxStreamsPerTenant)
	nonNegative(v, "sessions.events.max_bytes_per_principal", ev.MaxBytesPerPrincipal)
	nonNegative(v, "sessions.events.max_bytes_per_tenant", ev.MaxBytesPerTenant)
	if ev.MaxBytes > 0 && ev.BytesPerStream > ev.MaxBytes {
		v.addf("sessions.events.bytes_per_stream", "%d exceeds sessions.events.max_bytes (%d)", ev.BytesPerStream, ev.MaxBytes)
	}
	v.sessionShares(s)
	v.redis("sessions.redis", &s.Redis)
}

// sessionShares warns of a share of a pool that is not one: larger than
// the pool, so that one principal or tenant may take all of it (the
// memory store's pools; Redis has none), or a principal's larger than its
// tenant's. And of a stream's log that cannot fit a principal's share of
// the bytes: such a stream loses its log (it cannot be resumed).
func (v *validator) sessionShares(s *Sessions) {
	over := func(path string, share, bound int64, boundPath string) {
		if share > 0 && bound > 0 && share > bound {
			v.warnf(path, "%d exceeds %s (%d): it is no share", share, boundPath, bound)
		}
	}
	ev := &s.Events
	if s.Store != StoreRedis {
		over("sessions.max_per_principal", int64(s.MaxPerPrincipal), int64(s.MaxSessions), "sessions.max_sessions")
		over("sessions.max_per_tenant", int64(s.MaxPerTenant), int64(s.MaxSessions), "sessions.max_sessions")
		over("sessions.tasks.max_per_principal", int64(s.Tasks.MaxPerPrincipal), int64(s.Tasks.MaxTasks), "sessions.tasks.max_tasks")
		over("sessions.tasks.max_per_tenant", int64(s.Tasks.MaxPerTenant), int64(s.Tasks.MaxTasks), "sessions.tasks.max_tasks")
		over("sessions.events.max_streams_per_principal", int64(ev.MaxStreamsPerPrincipal), int64(ev.MaxStreams), "sessions.events.max_streams")
		over("sessions.events.max_streams_per_tenant", int64(ev.MaxStreamsPerTenant), int64(ev.MaxStreams), "sessions.events.max_streams")
		over("sessions.events.max_bytes_per_principal", ev.MaxBytesPerPrincipal, ev.MaxBytes, "sessions.events.max_bytes")
		over("sessions.events.max_bytes_per_tenant", ev.MaxBytesPerTenant, ev.MaxBytes, "sessions.events.max_bytes")
		over("sessions.events.max_streams_per_principal", int64(ev.MaxStreamsPerPrincipal), int64(ev.MaxStreamsPerTenant), "sessions.events.max_streams_per_tenant")
		over("sessions.events.max_bytes_per_principal", ev.MaxBytesPerPrincipal, ev.MaxBytesPerTenant, "sessions.events.max_bytes_per_tenant")
		if ev.MaxBytesPerPrincipal > 0 && ev.BytesPerStream > ev.MaxBytesPerPrincipal {
			v.warnf("sessions.events.bytes_per_stream", "%d exceeds sessions.events.max_bytes_per_principal (%d): a stream whose log grows past the share loses it", ev.BytesPerStream, ev.MaxBytesPerPrincipal)
		}
	}
	over("sessions.max_per_principal", int64(s.MaxPerPrincipal), int64(s.MaxPerTenant), "sessions.max_per_tenant")
}

// redis checks the Redis settings. They are checked whatever the store:
// every rule accepts their zero values, so an absent section passes, and a
// present one is checked even before it is used.
func (v *validator) redis(path string, r *Redis) {
	for i, a := range r.Addrs {
		v.hostPort(fmt.Sprintf("%s.addrs[%d]", path, i), a)
	}
	if r.DB < 0 {
		v.addf(path+".db", "must not be negative")
	}
	// An empty KeyPrefix means the default; the decoder rejects an
	// explicit "" in a file.
	nonNegative(v, path+".timeout", r.Timeout)
}

// isZero reports whether r holds no settings.
func (r *Redis) isZero() bool {
	return len(r.Addrs) == 0 && r.MasterName == "" && r.Username == "" && r.Password == "" &&
		r.DB == 0 && !r.TLS && r.KeyPrefix == "" && r.Timeout == 0
}

// hostPort checks a host:port address to connect to. It does not quote
// an address that looks like a URL, which may hold a password.
func (v *validator) hostPort(path, addr string) {
	if strings.Contains(addr, "://") || strings.Contains(addr, "@") {
		v.addf(path, "must be host:port, not a URL (put a password in sessions.redis.password)")
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		v.addf(path, `invalid address %q: want host:port, such as "127.0.0.1:6379"`, addr)
		return
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		v.addf(path, "invalid port in %q: want a number from 1 to 65535", addr)
	}
}

func (v *validator) upstreams(us []Upstream) {
	byName := make(map[string]int)   // name -> index of first upstream
	byPrefix := make(map[string]int) // effective prefix -> index
	for i := range us {
		u := &us[i]
		path := fmt.Sprintf("upstreams[%d]", i)
		v.upstream(path, u)

		if u.Name != "" {
			if j, ok := byName[u.Name]; ok {
				v.addf(path+".name", "duplicate upstream name %q (also upstreams[%d])", u.Name, j)
			} else {
				byName[u.Name] = i
			}
		}
		if p := u.EffectivePrefix(); p != "" {
			// A duplicate name whose prefix defaults to it was reported
			// just above; saying it twice helps nobody.
			if j, ok := byPrefix[p]; ok && !(u.Prefix == nil && us[j].Name == u.Name) {
				where := path + ".prefix"
				if u.Prefix == nil {
					where = path + ".name"
				}
				v.addf(where, "prefix %q is already used by upstreams[%d]; set a distinct prefix", p, j)
			} else {
				byPrefix[p] = i
			}
		}
	}
	if len(us) < 2 {
		return
	}
	for i := range us {
		if u := &us[i]; u.Prefix != nil && *u.Prefix == "" {
			// Not an error: one unprefixed upstream among prefixed ones is
			// a supported setup, but its names share the clients' namespace
			// with every other upstream's.
			v.warnf(fmt.Sprintf("upstreams[%d].prefix", i),
				`is "" beside other upstreams: its names may collide with theirs (a name two upstreams list is hidden), `+
					`and the names it lists in another upstream's namespace ("<prefix>__...", "<prefix>+...") are dropped from it`)
		}
	}
}

func (v *validator) upstream(path string, u *Upstream) {
	switch {
	case u.Name == "":
		v.addf(path+".name", "is required")
	case len(u.Name) > maxNameLen:
		v.addf(path+".name", "%q is longer than %d characters", u.Name, maxNameLen)
	case !nameRE.MatchString(u.Name):
		v.addf(path+".name", "%q must contain only a-z, 0-9 and -", u.Name)
	}

	v.upstreamTransport(path, u)

	if u.Prefix != nil {
		switch p := *u.Prefix; {
		case len(p) > maxNameLen:
			v.addf(path+".prefix", "%q is longer than %d characters", p, maxNameLen)
		case !prefixRE.MatchString(p):
			v.addf(path+".prefix", `%q must contain only a-z, 0-9 and - ("" for no namespace)`, p)
		}
	}

	nonNegative(v, path+".timeout", u.Timeout)
	v.headers(path+".headers", u.Headers)
	v.upstreamAuth(path+".auth", u.Auth)
	switch {
	case u.IsOpenAPI():
		if u.OpenAPI != nil {
			v.upstreamTLS(path+".tls", u.OpenAPI.BaseURL, u.TLS)
		}
	case !u.IsStdio():
		v.upstreamTLS(path+".tls", u.URL, u.TLS)
	}

	switch u.AuditArguments {
	case "", AuditArgumentsNone, AuditArgumentsHash, AuditArgumentsRedacted:
	default:
		v.addf(path+".audit_arguments", "unknown mode %q: must be %q, %q or %q",
			u.AuditArguments, AuditArgumentsNone, AuditArgumentsHash, AuditArgumentsRedacted)
	}
	switch u.Lists {
	case "", ListsShared, ListsPerSession:
	default:
		v.addf(path+".lists", "unknown mode %q: must be %q or %q", u.Lists, ListsShared, ListsPerSession)
	}
	if in := u.Instructions; in != nil {
		switch in.Mode {
		case "", InstructionsUpstream, InstructionsOff:
			if in.Text != "" {
				v.addf(path+".instructions.text", "is used only with mode %q", InstructionsOverride)
			}
		case InstructionsOverride:
			switch {
			case in.Text == "":
				v.addf(path+".instructions.text", "is required with mode %q (mode %q gives none)", InstructionsOverride, InstructionsOff)
			case len(in.Text) > MaxInstructionsBytes:
				v.addf(path+".instructions.text", "is %d bytes, more than %d", len(in.Text), MaxInstructionsBytes)
			}
		default:
			v.addf(path+".instructions.mode", "unknown mode %q: must be %q, %q or %q", in.Mode, InstructionsUpstream, InstructionsOverride, InstructionsOff)
		}
	}
	if va := u.Validation; va != nil {
		switch va.Arguments {
		case "", ValidationEnforce, ValidationOff:
		default:
			v.addf(path+".validation.arguments", "unknown mode %q: must be %q or %q", va.Arguments, ValidationEnforce, ValidationOff)
		}
		switch va.Results {
		case "", ValidationOff, ValidationWarn, ValidationEnforce:
		default:
			v.addf(path+".validation.results", "unknown mode %q: must be %q, %q or %q", va.Results, ValidationOff, ValidationWarn, ValidationEnforce)
		}
	}
}

// headers checks header names and values. Values are secrets: no problem
// quotes one. Invalid names are not quoted either, since a malformed entry
// may be a secret pasted in the wrong place.
func (v *validator) headers(path string, h map[string]string) {
	names := slices.Sorted(maps.Keys(h))
	// Order by position so that a case-insensitive duplicate is reported
	// on the later line.
	slices.SortStableFunc(names, func(a, b string) int {
		return v.pos[headerKey(path, a)].line - v.pos[headerKey(path, b)].line
	})
	canonical := make(map[string]string)
	for _, name := range names {
		pos := v.pos[headerKey(path, name)]
		if pos == (position{}) {
			pos = v.find(path)
		}
		if !validHeaderName(name) {
			v.addAtf(pos, path, "header name on this line is not a valid HTTP field name")
			continue
		}
		p := joinPath(path, name)
		ck := http.CanonicalHeaderKey(name)
		if reservedHeaders[ck] {
			v.addAtf(pos, p, "is set by the gateway itself and cannot be configured")
			continue
		}
		if first, ok := canonical[ck]; ok {
			v.addAtf(pos, p, "duplicate header (same as %s; names are case-insensitive)", first)
		} else {
			canonical[ck] = name
		}
		if !validHeaderValue(h[name]) {
			v.addAtf(pos, p, "value contains control characters (after ${VAR} expansion)")
		}
	}
}

// reservedHeaders are the headers the gateway's upstream client manages:
// protocol headers whose values it chooses per request, and hop-by-hop or
// framing headers a static value would break.
var reservedHeaders = map[string]bool{
	"Accept": true, "Content-Type": true, "Content-Length": true, "Host": true,
	"Connection": true, "Transfer-Encoding": true, "Te": true, "Upgrade": true,
	protocol.HeaderSessionID: true, protocol.HeaderProtocolVersion: true, protocol.HeaderLastEventID: true,
	"Traceparent": true, "Tracestate": true, "Baggage": true,
}

// listenAddr checks a host:port listen address.
func (v *validator) listenAddr(path, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.addf(path, `invalid address %q: want host:port, such as ":8080" or "127.0.0.1:9090"`, addr)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.addf(path, "invalid port in %q: want a number from 0 to 65535", addr)
	}
}

// httpURL checks an absolute http or https URL. It never quotes the URL,
// which may hold credentials.
func (v *validator) httpURL(path, s string) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		v.addf(path, "must be an absolute http or https URL")
		return
	}
	if u.User != nil {
		v.addf(path, "must not contain credentials (user:password@); put them in headers")
	}
}

// maxTaskListPage bounds a tasks/list page: each task on it is refreshed
// from its upstream.
const maxTaskListPage = 1000

// nonNegative reports a negative size or duration. Zero means "default"
// here; the decoder rejects an explicit zero in a file.
func nonNegative[T ~int | ~int64](v *validator, path string, n T) {
	if n < 0 {
		v.addf(path, "must be positive")
	}
}

// isOrigin reports whether s is a serialized origin: scheme://host[:port],
// with nothing after it.
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	return u.Scheme != "" && u.Hostname() != "" && u.Opaque == "" && u.User == nil &&
		u.Path == "" && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" &&
		!strings.HasSuffix(s, "#")
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validHeaderValue reports whether s may be sent as a header value: no
// control characters other than horizontal tab. net/http refuses to send
// anything else, and CR or LF would split the header.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// upstreamTransport checks the keys of u's transport: url for the HTTP
// ones, command, env, working_dir and stdio for stdio.
func (v *validator) upstreamTransport(path string, u *Upstream) {
	switch u.Transport {
	case "", TransportHTTP, TransportSSE, TransportAuto, TransportStdio, TransportOpenAPI:
	default:
		v.addf(path+".transport", "unknown transport %q: must be %q, %q, %q, %q or %q",
			u.Transport, TransportHTTP, TransportSSE, TransportAuto, TransportStdio, TransportOpenAPI)
		return
	}
	if u.IsOpenAPI() {
		v.upstreamOpenAPI(path, u)
		return
	}
	if u.OpenAPI != nil {
		v.addf(path+".openapi", "applies to openapi upstreams only (transport: openapi)")
	}
	if !u.IsStdio() && v.skipped(path+".command") {
		// A command that could not be read (a string, say) was meant:
		// that one problem is reported, not a missing url too.
		return
	}
	if !u.IsStdio() {
		if u.URL == "" {
			v.addf(path+".url", "is required")
		} else {
			v.httpURL(path+".url", u.URL)
		}
		for _, k := range []struct {
			key string
			set bool
		}{{"command", len(u.Command) > 0}, {"env", u.Env != nil}, {"working_dir", u.WorkingDir != ""}, {"stdio", u.Stdio != nil}} {
			if k.set {
				v.addf(path+"."+k.key, "applies to stdio upstreams only (transport: stdio)")
			}
		}
		return
	}
	if u.URL != "" {
		v.addf(path+".url", "must not be set for a stdio upstream (it runs command)")
	}
	if len(u.Command) == 0 || u.Command[0] == "" {
		v.addf(path+".command", "is required for a stdio upstream: the program and its arguments")
	} else if _, err := exec.LookPath(u.Command[0]); err != nil {
		// Only a warning: the program may exist where the gateway runs,
		// not where the config is checked.
		v.warnf(path+".command", "%q is not found here (%s): the upstream fails on first use unless it exists where the gateway runs", u.Command[0], lookPathReason(err))
	}
	if len(u.Headers) > 0 {
		v.addf(path+".headers", "does not apply to a stdio upstream: give it credentials in env")
	}
	if u.Auth != nil {
		v.addf(path+".auth", "does not apply to a stdio upstream: give it credentials in env")
	}
	if u.TLS != nil {
		v.addf(path+".tls", "does not apply to a stdio upstream")
	}
	v.env(path+".env", u.Env)
	if s := u.Stdio; s != nil {
		switch s.Isolation {
		case "", IsolationTenant, IsolationShared, IsolationSession:
		default:
			v.addf(path+".stdio.isolation", "unknown isolation %q: must be %q, %q or %q",
				s.Isolation, IsolationTenant, IsolationShared, IsolationSession)
		}
		nonNegative(v, path+".stdio.idle_timeout", s.IdleTimeout)
		nonNegative(v, path+".stdio.stop_grace", s.StopGrace)
	}
}

// env checks the names of environment variables; the values are secrets
// and never quoted.
func (v *validator) env(path string, env map[string]string) {
	for _, name := range slices.Sorted(maps.Keys(env)) {
		pos := v.pos[headerKey(path, name)]
		if pos == (position{}) {
			pos = v.find(path)
		}
		if !isVarName(name) {
			v.addAtf(pos, path, "variable name on this line is not valid: want letters, digits and underscores, not starting with a digit")
			continue
		}
		if strings.ContainsRune(env[name], 0) {
			v.addAtf(pos, joinPath(path, name), "value contains a NUL byte (after ${VAR} expansion)")
		}
	}
}

// lookPathReason is why exec.LookPath failed, without the search path.
func lookPathReason(err error) string {
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return "not in PATH"
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case errors.Is(err, fs.ErrPermission):
		return "not executable"
	}
	return "cannot be run"
}
