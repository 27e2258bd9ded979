// Package upstream is the gateway's client side: one Client per configured
// upstream MCP server, speaking Streamable HTTP (protocol 2025-11-25 and
// older) to it.
//
// A stdio upstream (a local program) and a 2024-11-05 HTTP+SSE upstream
// are reached the same way: package pipe serves each as a Streamable HTTP
// endpoint inside the gateway's process, and the Client's HTTP client
// reaches that endpoint with no socket (see pipes.go). The Client is the
// one type the rest of the gateway sees, whatever the transport.
//
// A Client is shared by every gateway session; the per-session part (the
// upstream's Mcp-Session-Id and negotiated version) is a [session.Upstream]
// value the caller keeps and passes in. Credentials come only from the
// upstream's config and from Options.Credentials (the gateway's own, or
// what it got for the caller): nothing of the client's request (its token
// above all) ever reaches an upstream, because this package never sees it.
//
// Everything an upstream sends is untrusted input: sizes are bounded, every
// request is bounded by the upstream's timeout, and the upstream's HTTP
// status codes are interpreted here and never relayed to the gateway's
// clients as they are.
//
// # Requests and streams
//
// Every JSON-RPC message is one HTTP POST. [Client.Call] returns as soon as
// the upstream's status and headers are in; the body, a single JSON object or
// an event stream, is read message by message with [Response.Next], so
// progress notifications and server-to-client requests reach the caller the
// moment they arrive. The upstream's timeout covers the whole exchange, from
// the POST until [Response.Close].
//
// An event stream that breaks before the response arrived is resumed with a
// GET carrying Last-Event-ID, if the upstream gave its events ids (spec
// 2025-11-25 basic/transports, "Resumability and Redelivery").
//
// # Cancellation
//
// A request abandoned before its response (the caller's context cancelled,
// the timeout reached, or the Response closed early) is cancelled upstream
// with notifications/cancelled, sent in the background on a context detached
// from the caller's and bounded by a few seconds. [Client.Close] waits for
// those. initialize is never cancelled (basic/utilities/cancellation).
package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/openapi"
	"github.com/mcpgw/gateway/internal/pipe"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
)

// ErrSessionExpired means the upstream no longer knows the session: it
// answered 404 to a request carrying an Mcp-Session-Id (or 400 mentioning the
// session, see [Client.Call]). The caller should initialize a new upstream
// session and retry.
var ErrSessionExpired = errors.New("upstream session expired")

// Options configure a Client. The zero value is usable.
type Options struct {
	// HTTPClient sends the requests. If nil, a client with a dedicated,
	// keep-alive transport is used, with the TLS settings of the upstream's
	// config (upstreams[].tls). A given HTTPClient is used as it is: its
	// TLS settings are the caller's, and the config's are ignored (New logs
	// a warning when there are some). Its Timeout should be zero: the
	// upstream's own timeout is applied per request.
	HTTPClient *http.Client
	// Logger, if nil, means no logging.
	Logger *slog.Logger
	// ClientInfo is the Implementation the gateway announces in initialize.
	ClientInfo json.RawMessage
	// Capabilities are the gateway's own client capabilities announced in
	// initialize. Nil means {}.
	Capabilities json.RawMessage
	// MaxMessageBytes bounds one message (a JSON body or one SSE event) read
	// from the upstream. Default 16 MiB.
	MaxMessageBytes int64
	// Inject, if set, adds headers derived from the request's context to
	// every request (trace context: traceparent, tracestate, baggage). It
	// runs after the config's headers and before the protocol's.
	Inject func(ctx context.Context, h http.Header)
	// Credentials, if set, add to each request the credentials of the
	// caller its context carries, after the config's headers (replacing
	// those of the same name). A request the upstream refuses with 401 is
	// sent once more with fresh ones, if Invalidate says they may differ.
	Credentials Credentials
	// Secrets are credentials for the upstream beyond the values of
	// upstreams[].headers (which are secrets already): they are scrubbed
	// from every error and log line derived from the upstream's answers.
	// See [Scrubber].
	Secrets []string

	// Tenant returns the tenant a request's context is for; a stdio
	// upstream isolated per tenant runs one process for each. Nil means
	// every request is the same tenant's.
	Tenant func(ctx context.Context) string
	// TenantEnv is the env a stdio upstream's processes get, by tenant,
	// over the upstream's own (tenants[].upstreams[].env). Its values are
	// secrets.
	TenantEnv map[string]map[string]string
	// ProcessLimit, if set, bounds the processes of every stdio upstream
	// sharing it (limits.stdio_processes).
	ProcessLimit *pipe.Limit
	// OnProcess, if set, is told when a stdio process starts (+1) and ends
	// (-1), and whether it ended by itself (it exited or crashed).
	OnProcess func(delta int, exited bool)
	// OnProcessLimit, if set, is told when a session of tenant could not
	// open because the stdio processes reached a bound: pipe.LimitMaxConns
	// (upstreams[].stdio.max_processes) or pipe.LimitTotal
	// (limits.stdio_processes).
	OnProcessLimit func(limit, tenant string)
}

// Credentials produce the per-request credentials of an upstream (see
// internal/credentials).
type Credentials interface {
	Apply(ctx context.Context, h http.Header) error
	Invalidate(ctx context.Context) bool
	Close()
}

// InitResult is what an upstream answered to initialize.
type InitResult struct {
	Session      session.Upstream
	ServerInfo   json.RawMessage
	Instructions string
}

const (
	defaultTimeout         = 30 * time.Second
	defaultMaxMessageBytes = 16 << 20
	// cancelTimeout bounds sending notifications/cancelled (and the DELETE of
	// a session initialize had to give up on); go-sdk uses the same value
	// (notifyCancellationTimeout).
	cancelTimeout = 5 * time.Second
	// maxErrorBody is how much of a non-2xx body is read to classify it;
	// maxExcerpt is how much of it may appear in an error message.
	maxErrorBody = 4 << 10
	maxExcerpt   = 200
	// maxSessionIDLen bounds the Mcp-Session-Id an upstream may issue; it is
	// stored in every gateway session record.
	maxSessionIDLen = 1024
)

// protocolHeaders are the headers this package sets itself; the config's
// headers cannot replace them.
var protocolHeaders = []string{"Accept", "Content-Type", "Content-Length",
	protocol.HeaderSessionID, protocol.HeaderProtocolVersion, protocol.HeaderLastEventID}

// A Client talks to one upstream MCP server over Streamable HTTP. Its methods
// are safe for use by multiple goroutines.
type Client struct {
	name    string
	url     string
	timeout time.Duration
	header  http.Header // config headers, canonical keys; never modified
	hc      *http.Client
	own     *http.Transport // the default transport, if hc is ours
	// streamHC opens the streams that last (Watch): on a transport of
	// its own with small buffers when hc is ours, since each such stream
	// holds a connection, and its buffers, for as long as it lasts; else
	// hc.
	streamHC  *http.Client
	ownStream *http.Transport
	log       *slog.Logger
	maxMsg    int
	inject    func(context.Context, http.Header)
	creds     Credentials
	// setupErr makes every request fail: the configured URL does not
	// parse, or the TLS files no longer load.
	setupErr error
	// initParams is the initialize request's params, built once.
	initParams json.RawMessage
	// redact lists strings (URL, host) removed from error messages.
	redact *strings.Replacer
	// secrets removes the header values and Options.Secrets from them.
	secrets *Scrubber

	bg background // notifications/cancelled and DELETEs in flight

	// era is what the client learned of the revision the upstream speaks
	// (eraUnknown, eraModern or eraLegacy); see Open.
	era atomic.Int32
	// info and caps are the gateway's client info and capabilities.
	info, caps json.RawMessage
	// discoverParams are the params of server/discover: the version, the gateway's
	// client info and capabilities.
	discoverParams json.RawMessage

	// pipe serves a stdio or HTTP+SSE upstream in process (see pipes.go);
	// nil for a Streamable HTTP one. auto is set for transport auto.
	pipe      *pipe.Handler
	pipeTrans *pipe.Transport
	auto      *autoTransport
	// api serves an openapi upstream in process (see openapi.go); nil
	// for any other.
	api *openapi.API
}

// New returns a client for upstream cfg. It does no network I/O; a URL that
// does not parse makes every request fail. It reads the files of cfg.TLS,
// when it builds its own transport (see [config.UpstreamTLS.Load]): the
// config's validation read them already, so they fail to load here only if
// they changed on disk since, and then every request fails too.
func New(cfg config.Upstream, opts Options) *Client {
	c := &Client{
		name:    cfg.Name,
		url:     cfg.URL,
		timeout: cfg.Timeout.D(),
		header:  make(http.Header, len(cfg.Headers)),
		hc:      opts.HTTPClient,
		log:     opts.Logger,
		inject:  opts.Inject,
		creds:   opts.Credentials,
	}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	secrets := slices.Clone(opts.Secrets)
	for k, v := range cfg.Headers {
		secrets = append(secrets, v)
		k = http.CanonicalHeaderKey(k)
		if !slices.Contains(protocolHeaders, k) {
			c.header[k] = []string{v}
		}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("upstream", cfg.Name)
	c.maxMsg = defaultMaxMessageBytes
	if opts.MaxMessageBytes > 0 {
		c.maxMsg = int(min(opts.MaxMessageBytes, math.MaxInt32))
	}
	if cfg.IsStdio() {
		for _, env := range opts.TenantEnv {
			for _, v := range env {
				secrets = append(secrets, v)
			}
		}
		for _, v := range cfg.Env {
			secrets = append(secrets, v)
		}
		scrub := NewScrubber(secrets...)
		opts.MaxMessageBytes = int64(c.maxMsg)
		c.pipe = newStdioHandler(cfg, opts, c.log, scrub.Replace)
		c.pipeTrans = pipe.NewTransport(c.pipe)
		c.hc = &http.Client{Transport: c.pipeTrans}
		c.url = pipeURL
		cfg.TLS = nil
	}
	if c.hc != nil && cfg.TLS != nil {
		c.log.Warn("upstream tls settings are ignored: the client was given an HTTP client of its own")
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.TLS != nil {
			tc, err := cfg.TLS.Load()
			if err != nil {
				// The error names files, never their contents; the
				// clients are told only that the upstream is unusable.
				c.log.Error("upstream tls: every request will fail", "error", err)
				c.setupErr = errors.New("invalid upstream TLS settings")
			}
			t.TLSClientConfig = tc
		}
		t.MaxIdleConnsPerHost = idleConnsPerHost
		t.MaxIdleConns = 256
		// Without this the transport adds Accept-Encoding: gzip, a header
		// neither the config nor the protocol asked for, and compressing
		// proxies are known to buffer event streams.
		t.DisableCompression = true
		// net/http's 4 KiB buffers split a 10 KB request into two writes
		// (and allocate a 32 KiB copy buffer for the second), and its
		// answer into several reads.
		t.WriteBufferSize, t.ReadBufferSize = 32<<10, 32<<10
		// A tools/call must not be lost on a connection the upstream
		// closed while it was idle (see replayable).
		t.DialContext = liveDialer(t.DialContext)
		c.own = t
		c.hc = &http.Client{
			Transport: t,
			// A redirect would carry the config's headers (credentials) to
			// wherever the upstream points; an upstream URL must be exact.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if cfg.IsOpenAPI() {
		c.serveOpenAPI(cfg)
	}
	if t := cfg.Transport; t == config.TransportSSE || t == config.TransportAuto {
		c.pipe = c.newSSEHandler(cfg, c.hc)
		c.pipeTrans = pipe.NewTransport(c.pipe)
		legacy := &http.Client{Transport: c.pipeTrans}
		if t == config.TransportSSE {
			c.hc = legacy
			c.url = pipeURL
		} else {
			// The real URL: requests go there until the upstream is
			// found to be legacy, and the Handler ignores it.
			rt := c.hc.Transport
			if rt == nil {
				rt = http.DefaultTransport
			}
			c.auto = &autoTransport{http: rt, legacy: c.pipeTrans}
			c.hc = &http.Client{Transport: c.auto, CheckRedirect: c.hc.CheckRedirect, Jar: c.hc.Jar}
		}
	}

	c.streamHC = c.hc
	if c.own != nil && c.hc.Transport == c.own {
		// 4 KiB buffers, net/http's default: a stream's messages are
		// few and small, and it keeps its connection's buffers for as
		// long as it lasts (3,000 relayed GET streams held 380 MiB of
		// heap with the calls' 32 KiB ones, 135 MiB with these).
		c.ownStream = c.own.Clone()
		c.ownStream.WriteBufferSize, c.ownStream.ReadBufferSize = 4<<10, 4<<10
		c.streamHC = &http.Client{Transport: c.ownStream, CheckRedirect: c.hc.CheckRedirect}
	}

	var redact []string
	if c.url == pipeURL {
		redact = append(redact, pipeURL, "<upstream>")
	}
	if u, err := url.Parse(cfg.URL); c.url == pipeURL && cfg.IsStdio() {
		// No URL: the command is the config's, not a secret.
	} else if cfg.IsOpenAPI() {
		redact = append(redact, c.restRedactions()...)
	} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.setupErr = errors.New("invalid upstream URL")
	} else {
		// The whole URL before the host it contains: at one position, the
		// first string listed that matches wins.
		redact = append(redact, cfg.URL, "<upstream>", u.Redacted(), "<upstream>", u.Host, "<upstream>")
		if h := u.Hostname(); h != u.Host {
			redact = append(redact, h, "<upstream>")
		}
		// A certificate name mismatch quotes the name verified.
		if cfg.TLS != nil && cfg.TLS.ServerName != "" {
			redact = append(redact, cfg.TLS.ServerName, "<upstream>")
		}
	}
	c.redact = strings.NewReplacer(redact...)
	c.secrets = NewScrubber(secrets...)

	info := opts.ClientInfo
	if len(info) == 0 {
		info = json.RawMessage(`{"name":"mcpgw","version":"0"}`)
	}
	caps := opts.Capabilities
	if len(caps) == 0 {
		caps = json.RawMessage(`{}`)
	}
	p := append([]byte(`{"protocolVersion":"`+protocol.LatestSession.String()+`","capabilities":`), caps...)
	p = append(p, `,"clientInfo":`...)
	p = append(p, info...)
	c.initParams = append(p, '}')
	c.info, c.caps = info, caps
	c.discoverParams = WithModernMeta(nil, info, caps)
	return c
}

// Name returns the upstream's configured name.
func (c *Client) Name() string { return c.name }

// Timeout returns the bound on each request to the upstream.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Close waits for the notifications the client sends in the background (each
// bounded by a few seconds) and closes the idle connections of the client's
// own transport. The client remains usable.
//
// A stdio or HTTP+SSE upstream's Close also stops its processes (or
// streams), all at once, and waits for them: requests made after it fail.
// It first lets the requests in flight finish, for at most the upstream's
// timeout (a reload replaces a client while its calls go on).
func (c *Client) Close() error {
	c.bg.Wait()
	if c.pipe != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		c.pipe.Drain(ctx)
		cancel()
		c.pipe.Close()
		c.pipeTrans.Close()
	}
	if c.creds != nil {
		c.creds.Close()
	}
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
	if c.ownStream != nil {
		c.ownStream.CloseIdleConnections()
	}
	return nil
}

// legacyVersion is the revision of the HTTP+SSE transport, accepted from
// the upstreams served in process (see pipes.go).
const legacyVersion = "2024-11-05"

// initializeID is the id of the initialize request; it is alone on its
// connection, so any id will do.
var initializeID = jsonrpc.IntID(0)

// Initialize opens a new upstream session: it sends initialize (protocol
// 2025-11-25, the configured client info and capabilities), checks that the
// upstream answered with a protocol version this client speaks, and sends
// notifications/initialized on the new session. The whole exchange is bounded
// by the upstream's timeout. An upstream that is stateless issues no session
// id; the returned SessionID is then "".
//
// If the upstream answers initialize with a JSON-RPC error, the returned
// *Error wraps that *jsonrpc.Error.
func (c *Client) Initialize(ctx context.Context) (*InitResult, error) {
	return c.initialize(ctx, c.initParams)
}

// InitializeAs is Initialize announcing caps as the client capabilities
// instead of the configured ones (nil: the configured ones). A piped
// upstream (stdio, HTTP+SSE) is one session shared by the gateway's, so
// it is always initialized with the configured ones (see [Client.PerSession]).
func (c *Client) InitializeAs(ctx context.Context, caps json.RawMessage) (*InitResult, error) {
	if caps == nil || !c.PerSession() {
		return c.initialize(ctx, c.initParams)
	}
	p := append([]byte(`{"protocolVersion":"`+protocol.LatestSession.String()+`","capabilities":`), caps...)
	p = append(p, `,"clientInfo":`...)
	p = append(p, c.info...)
	return c.initialize(ctx, append(p, '}'))
}

// PerSession reports whether each upstream session is the upstream's own,
// so that what one announces (its client capabilities) is that session's
// alone. A piped upstream's sessions share the server's one.
func (c *Client) PerSession() bool { return !c.piped() }

func (c *Client) initialize(ctx context.Context, params json.RawMessage) (*InitResult, error) {
	const op = protocol.MethodInitialize
	ctx, stop := c.withTimeout(ctx)
	defer stop()

	r, err := c.call(ctx, session.Upstream{}, initializeID, op, jsonrpc.RawParams(params), false, nil)
	if err != nil {
		return nil, err
	}
	var final *jsonrpc.Message
	for final == nil {
		msg, _, err := r.Next()
		if err != nil {
			r.Close()
			return nil, err
		}
		if msg.Kind == jsonrpc.KindResponse || msg.Kind == jsonrpc.KindErrorResponse {
			final = msg
		}
		// Notifications before the result (logging) have no one to go to, and
		// a request (ping) cannot be answered before initialized.
	}
	sid := r.header.Get(protocol.HeaderSessionID)
	r.Close()

	if final.Kind == jsonrpc.KindErrorResponse {
		return nil, c.error(op, 0, shortened(final.Error))
	}
	if !validSessionID(sid) {
		// Nothing to terminate: the id cannot be sent back.
		return nil, c.error(op, 0, errors.New("upstream issued an invalid Mcp-Session-Id"))
	}
	var res struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions"`
	}
	if err := json.Unmarshal(final.Result, &res); err != nil {
		c.terminateInBackground(ctx, sid)
		return nil, c.error(op, 0, fmt.Errorf("invalid initialize result: %v", err))
	}
	// The client asks for the newest revision and accepts the older ones
	// an upstream may answer with (lifecycle, "Version Negotiation").
	// Servers of the HTTP+SSE transport, and older stdio servers, often
	// speak only 2024-11-05, whose messages the gateway relays as they are
	// (what later revisions added, they do not send).
	if !protocol.Listed(res.ProtocolVersion, protocol.SessionVersions) && (!c.piped() || res.ProtocolVersion != legacyVersion) {
		// The spec says the client SHOULD disconnect; the session is useless.
		c.terminateInBackground(ctx, sid)
		return nil, c.error(op, 0, fmt.Errorf("unsupported protocol version %q", excerpt([]byte(res.ProtocolVersion), 40)))
	}
	s := session.Upstream{SessionID: sid, ProtocolVersion: res.ProtocolVersion, Capabilities: res.Capabilities}
	if err := c.notify(ctx, s, protocol.NotifyInitialized, nil); err != nil {
		c.terminateInBackground(ctx, sid)
		return nil, err
	}
	return &InitResult{Session: s, ServerInfo: res.ServerInfo, Instructions: res.Instructions}, nil
}

// validSessionID reports whether id is acceptable as an Mcp-Session-Id:
// visible ASCII (0x21 to 0x7E) only, as the spec requires, and not too long.
func validSessionID(id string) bool {
	if len(id) > maxSessionIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7E {
			return false
		}
	}
	return true
}

// Call sends one JSON-RPC request on upstream session s and returns the
// upstream's answer as a stream of messages, to be read with [Response.Next]
// and released with [Response.Close]. The upstream's timeout applies from
// now until Close.
//
// An upstream answering 404 to a request with a session id has forgotten the
// session: the error then matches [ErrSessionExpired]. So does a 400 whose
// body mentions the session, which is how the TypeScript SDK's servers have
// answered for an unknown session. Any other non-2xx status is an *Error
// with that Status.
func (c *Client) Call(ctx context.Context, s session.Upstream, id jsonrpc.ID, method string, params json.RawMessage) (*Response, error) {
	return c.CallWith(ctx, s, id, method, params, nil)
}

// CallWith is Call with extra headers: the Mcp-Param-* headers a
// 2026-07-28 upstream expects for a tools/call (any other is ignored).
func (c *Client) CallWith(ctx context.Context, s session.Upstream, id jsonrpc.ID, method string, params json.RawMessage, extra http.Header) (*Response, error) {
	return c.CallParams(ctx, s, id, method, jsonrpc.RawParams(params), extra)
}

// CallParams is CallWith with params that may be an object, encoded
// straight into the request's body (see jsonrpc.Params).
func (c *Client) CallParams(ctx context.Context, s session.Upstream, id jsonrpc.ID, method string, params jsonrpc.Params, extra http.Header) (*Response, error) {
	if !id.IsValid() || id.IsNull() {
		return nil, c.error(method, 0, errors.New("a request needs a string or number id"))
	}
	return c.call(ctx, s, id, method, params, true, extra)
}

// idleConnsPerHost is how many idle connections to its upstream a client's
// own transport keeps.
const idleConnsPerHost = 64

// replayable reports whether sending a request of this method twice does
// no harm. Every method the gateway sends is, but tools/call: a tool may act
// on the world, and is sent at most once.
//
// At most once, not at most one attempt: a tools/call is sent again when
// the upstream provably never received it, which is when the connection it
// went out on was closed by the upstream before a byte of it was written.
// An upstream that restarted, or dropped idle keep-alive connections, leaves
// such connections in the pool, and without this the first call after it
// would fail with EOF. Two cases are provable:
//   - The connections of the client's own transport are liveConns, which
//     fail the first write of a request with nothing written when the
//     upstream's end of the connection has already arrived. net/http resends
//     a request of which nothing was written on a connection used before, if
//     its body can be rewound (ours can: GetBody); on a connection never
//     used it returns errClosedBeforeSent, and call sends it again.
//   - net/http's "server closed idle connection": its reader saw the
//     upstream close the connection while no request was on it, and closed
//     it before this request was handed to it. net/http resends only
//     idempotent requests then; call sends a tools/call again.
//
// Each such failure uses up one dead connection of the pool, so call tries
// at most as many times as the pool holds connections, plus one. A
// connection never used that the upstream closed may as well be a fresh
// one, dialed for this request, to an upstream that accepts and closes at
// once (a load balancer with no backend): that case is sent again at most
// neverUsedRetries times, so such an upstream costs each call a few dials,
// not a pool's worth.
//
// EOF after the request was written (the upstream may have died while
// running the tool) is never a reason to send it again.
func replayable(method string) bool { return method != protocol.MethodToolsCall }

// neverUsedRetries bounds the resends after errClosedBeforeSent (see
// replayable).
const neverUsedRetries = 2

// notSent reports whether err proves that nothing of the request reached
// the upstream: errClosedBeforeSent, or net/http's "server closed idle
// connection" (unexported: matched by its text), which the transport
// returns only for a connection the upstream closed before the request was
// put on it.
func notSent(err error) bool {
	if errors.Is(err, errClosedBeforeSent) {
		return true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error() == "http: server closed idle connection"
}

// call starts a request. cancellable is false for initialize, which must not
// be cancelled.
func (c *Client) call(ctx context.Context, s session.Upstream, id jsonrpc.ID, method string, params jsonrpc.Params, cancellable bool, extra http.Header) (*Response, error) {
	tctx, stop := c.withTimeout(ctx)
	r := &Response{c: c, s: s, id: id, method: method, ctx: ctx, tctx: tctx, stop: stop, cancellable: cancellable}
	if IsModern(s) && !mentionsVersion(params) {
		// A request of the gateway's own (a list for the catalog): it
		// speaks for itself.
		if o, ok := params.Object(); ok {
			params = jsonrpc.ObjectParams(WithModernMetaObject(o, c.info, c.caps))
		} else {
			params = jsonrpc.RawParams(WithModernMeta(params.Bytes(), c.info, c.caps))
		}
	}
	// The body is one buffer, the params encoded in it: net/http must see
	// one contiguous body in memory (see newRequest). It is not pooled:
	// net/http may read it again (GetBody) for a retry, and may still be
	// writing it when an early answer or an error returned the call.
	body := jsonrpc.AppendRequestParams(nil, id, method, params)
	req, err := c.newRequest(tctx, http.MethodPost, s, body)
	if err != nil {
		stop()
		return nil, c.error(method, 0, err)
	}
	if IsModern(s) {
		setModernHeaders(req.Header, method, params, extra)
	}
	if replayable(method) {
		// A nil Idempotency-Key marks the request as safe to send again
		// without sending the header: net/http then retries it once when a
		// reused keep-alive connection turns out to have been closed by the
		// upstream (a restart, an idle timeout) before any answer.
		req.Header["Idempotency-Key"] = nil
	}
	if tctx.Err() != nil {
		// Nothing sent, nothing to cancel.
		stop()
		return nil, c.error(method, 0, context.Cause(tctx))
	}
	resp, err := c.hc.Do(req)
	for try, neverUsed := 0, 0; err != nil && try < idleConnsPerHost && notSent(err) && tctx.Err() == nil; try++ {
		if errors.Is(err, errClosedBeforeSent) {
			if neverUsed++; neverUsed > neverUsedRetries {
				break
			}
		}
		// Nothing of it reached the upstream (see replayable).
		resp, err = c.callAgain(tctx, req)
	}
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		// The upstream ran nothing: a token it no longer takes is
		// replaced, and the request sent once more.
		resp, err = c.reauthorize(tctx, req, resp)
	}
	if err != nil {
		err = c.transportError(tctx, method, err)
		if tctx.Err() != nil {
			// The request may have reached the upstream before the caller
			// gave up: tell it to stop.
			r.inFlight = true
			r.cancelUpstream()
		}
		stop()
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		stop()
		return nil, c.callStatusError(method, resp, s)
	}
	r.inFlight = true
	r.header = resp.Header
	r.length = resp.ContentLength
	r.req = resp.Request
	r.body = resp.Body
	switch mediaType(resp.Header) {
	case "application/json":
	case "text/event-stream":
		r.streaming = true
		r.sse = newSSEReader(resp.Body, "", c.maxMsg)
	default:
		if resp.StatusCode == http.StatusAccepted {
			err = errors.New("upstream accepted the request without answering it (202)")
		} else {
			err = fmt.Errorf("unexpected content type %q", excerpt([]byte(resp.Header.Get("Content-Type")), 64))
		}
		r.Close()
		return nil, c.error(method, resp.StatusCode, err)
	}
	return r, nil
}

// mentionsVersion reports whether the encoding of params contains the
// protocol version's _meta key anywhere, as the speaking-for-itself test
// of call has always been made: on an object, without encoding it (see
// jsonx.Object.Mentions).
func mentionsVersion(params jsonrpc.Params) bool {
	if o, ok := params.Object(); ok {
		return o.Mentions(protocol.MetaProtocolVersion)
	}
	return bytes.Contains(params.Bytes(), []byte(protocol.MetaProtocolVersion))
}

// resume reopens the event stream of a request with GET and Last-Event-ID.
func (c *Client) resume(ctx context.Context, s session.Upstream, op, lastEventID string) (io.ReadCloser, error) {
	req, err := c.newRequest(ctx, http.MethodGet, s, nil)
	if err != nil {
		return nil, c.error(op, 0, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(protocol.HeaderLastEventID, lastEventID)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, op, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, c.statusError(op, resp, s.SessionID != "")
	}
	if mediaType(resp.Header) != "text/event-stream" {
		resp.Body.Close()
		return nil, c.error(op, resp.StatusCode, fmt.Errorf("resumed stream has content type %q", excerpt([]byte(resp.Header.Get("Content-Type")), 64)))
	}
	return resp.Body, nil
}

// background tracks the goroutines a Client leaves running after a call
// returns. Unlike a sync.WaitGroup, it may be waited on while new work
// starts.
type background struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

// Go runs f in a new goroutine.
func (b *background) Go(f func()) {
	b.mu.Lock()
	if b.n == 0 {
		b.idle = make(chan struct{})
	}
	b.n++
	b.mu.Unlock()
	go func() {
		defer b.done()
		f()
	}()
}

func (b *background) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n--; b.n == 0 {
		close(b.idle)
	}
}

// Wait waits until no goroutine is running.
func (b *background) Wait() {
	b.mu.Lock()
	n, idle := b.n, b.idle
	b.mu.Unlock()
	if n > 0 {
		<-idle
	}
}
