package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/pipe"
	"github.com/mcpgw/gateway/internal/protocol"
)

// Stdio and legacy HTTP+SSE upstreams
//
// Neither is spoken to directly: each is served as a Streamable HTTP
// endpoint by a pipe.Handler in the gateway's own process, reached through
// a pipe.Transport, and the Client speaks Streamable HTTP to it as to any
// upstream (see package pipe). Everything above the HTTP client (sessions,
// streaming, cancellation, credentials, errors) is the same code for every
// transport.

// pipeURL is the URL of an in-process endpoint: it never reaches a network.
const pipeURL = "http://upstream.invalid/mcp"

// inheritedEnv are the only variables of the gateway's environment a stdio
// server gets besides its configured env: the gateway's environment holds
// its own secrets.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT"}

// StdioEnv returns the environment of a stdio server: inheritedEnv from
// getenv, then base, then tenant's (replacing base's of the same name).
func StdioEnv(getenv func(string) string, base, tenant map[string]string) []string {
	m := make(map[string]string, len(inheritedEnv)+len(base)+len(tenant))
	for _, k := range inheritedEnv {
		if v := getenv(k); v != "" {
			m[k] = v
		}
	}
	for k, v := range base {
		m[k] = v
	}
	for k, v := range tenant {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// newStdioHandler returns the Handler that runs cfg's processes.
func newStdioHandler(cfg config.Upstream, opts Options, log *slog.Logger, scrub func(string) string) *pipe.Handler {
	st := cfg.Stdio
	if st == nil {
		st = &config.UpstreamStdio{}
	}
	maxMsg := int(opts.MaxMessageBytes)
	iso := pipe.Isolation(st.Isolation)
	perPrincipal, perTenant := st.Shares()
	return pipe.NewHandler(pipe.Options{
		Name:           cfg.Name,
		Isolation:      iso,
		MaxConns:       st.MaxProcesses,
		PrincipalConns: perPrincipal,
		TenantConns:    perTenant,
		// What a process sends for no request it can tell is delivered
		// only where it reaches no other principal.
		Principal:   func(r *http.Request) string { return principalOf(r.Context()) },
		Limit:       opts.ProcessLimit,
		IdleTimeout: st.IdleTimeout.D(),
		Logger:      log,
		OnConn:      opts.OnProcess,
		OnLimit:     opts.OnProcessLimit,
		Tenant: func(r *http.Request) string {
			if opts.Tenant == nil {
				return ""
			}
			return opts.Tenant(r.Context())
		},
		Dial: func(_ context.Context, _ *http.Request, tenant string) (pipe.Conn, error) {
			var tenv map[string]string
			if iso != pipe.Shared {
				tenv = opts.TenantEnv[tenant]
			}
			l := log
			if tenant != "" {
				l = log.With("tenant", tenant)
			}
			p, err := pipe.Start(pipe.Command{
				Argv:            cfg.Command,
				Env:             StdioEnv(os.Getenv, cfg.Env, tenv),
				Dir:             cfg.WorkingDir,
				StopGrace:       st.StopGrace.D(),
				MaxMessageBytes: maxMsg,
				Logger:          l,
				Scrub:           scrub,
			})
			if err != nil {
				return nil, err
			}
			l.Info("stdio server started", "pid", p.PID())
			return p, nil
		},
	})
}

// principalOf returns who the caller a request's context carries is, as
// one string: the gateway's requests to a stdio upstream carry their
// caller (credentials.With), its own ones (ending a session) the caller
// of the session. No caller is the principal "".
func principalOf(ctx context.Context) string {
	c := credentials.From(ctx)
	return c.Issuer + "\x00" + c.Subject + "\x00" + c.Tenant
}

// sseIdleTimeout closes the SSE stream of a legacy upstream session that
// served nothing for that long.
const sseIdleTimeout = 10 * time.Minute

// newSSEHandler returns the Handler of a 2024-11-05 HTTP+SSE upstream: one
// SSE connection per session, made with hc.
func (c *Client) newSSEHandler(cfg config.Upstream, hc *http.Client) *pipe.Handler {
	return pipe.NewHandler(pipe.Options{
		Name:      cfg.Name,
		Isolation: pipe.PerSession,
		// An SSE stream held for a session that no longer calls is
		// closed; the session is opened again on its next request.
		IdleTimeout: sseIdleTimeout,
		Logger:      c.log,
		Dial: func(ctx context.Context, r *http.Request, _ string) (pipe.Conn, error) {
			return dialSSE(ctx, hc, cfg.URL, r.Header, c.maxMsg)
		},
	})
}

// autoTransport sends requests over Streamable HTTP until the upstream is
// found to speak the 2024-11-05 HTTP+SSE transport, then to its Handler
// (see Client.Open).
type autoTransport struct {
	http   http.RoundTripper
	legacy http.RoundTripper
	sse    atomic.Bool
}

func (t *autoTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.sse.Load() {
		return t.legacy.RoundTrip(req)
	}
	return t.http.RoundTrip(req)
}

// hopHeaders are the headers of an in-process request not sent on to an
// HTTP+SSE upstream: the protocol's, which differ between the transports.
var hopHeaders = []string{"Accept", "Content-Type", "Content-Length", protocol.HeaderSessionID,
	protocol.HeaderProtocolVersion, protocol.HeaderLastEventID, "Idempotency-Key"}

// sseConn is one session with a 2024-11-05 HTTP+SSE server (basic/
// transports, "Backwards Compatibility"): the server's messages come on the
// GET stream, the client's are POSTed to the endpoint the stream named
// first.
type sseConn struct {
	hc       *http.Client
	header   http.Header
	endpoint string
	body     io.ReadCloser
	sse      *sseReader
	cancel   context.CancelFunc
	once     sync.Once
}

// dialSSE opens the stream of url and reads its endpoint event, within
// ctx. The stream itself lasts until Close.
func dialSSE(ctx context.Context, hc *http.Client, rawURL string, h http.Header, maxMsg int) (*sseConn, error) {
	base, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("invalid upstream URL")
	}
	header := h.Clone()
	for _, k := range hopHeaders {
		header.Del(k)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel) // until the endpoint is known
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, rawURL, nil)
	if err != nil {
		stop()
		cancel()
		return nil, errors.New("invalid upstream URL")
	}
	req.Header = header.Clone()
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		stop()
		cancel()
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	fail := func(err error) (*sseConn, error) {
		stop()
		cancel()
		resp.Body.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("SSE stream: HTTP %d", resp.StatusCode))
	}
	if mediaType(resp.Header) != "text/event-stream" {
		return fail(fmt.Errorf("SSE stream has content type %q", excerpt([]byte(resp.Header.Get("Content-Type")), 64)))
	}
	c := &sseConn{hc: hc, header: header, body: resp.Body, sse: newSSEReader(resp.Body, "", maxMsg), cancel: cancel}
	for c.endpoint == "" {
		ev, err := c.sse.Next()
		if err != nil {
			return fail(fmt.Errorf("SSE stream ended before its endpoint event: %w", err))
		}
		if ev.Type != "endpoint" {
			continue
		}
		u, err := base.Parse(strings.TrimSpace(string(ev.Data)))
		if err != nil {
			return fail(errors.New("SSE endpoint event holds an invalid URL"))
		}
		// The endpoint gets the upstream's credentials: it must be the
		// upstream's own origin (basic/transports, HTTP+SSE "endpoint").
		if u.Scheme != base.Scheme || u.Host != base.Host {
			return fail(errors.New("SSE endpoint event names another origin"))
		}
		c.endpoint = u.String()
	}
	if !stop() {
		// ctx ended while the endpoint was read.
		return fail(context.Cause(ctx))
	}
	return c, nil
}

// Send POSTs msg to the endpoint. The server answers on the stream.
func (c *sseConn) Send(ctx context.Context, msg []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, strings.NewReader(string(msg)))
	if err != nil {
		return err
	}
	req.Header = c.header.Clone()
	if h := pipe.RequestHeader(ctx); h != nil {
		// This request's credentials, which may be fresher.
		for k, v := range h {
			if !slices.Contains(hopHeaders, k) {
				req.Header[k] = v
			}
		}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	discard(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("SSE endpoint answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// Recv returns the next message event's data.
func (c *sseConn) Recv() ([]byte, error) {
	for {
		ev, err := c.sse.Next()
		if err != nil {
			return nil, err
		}
		if ev.Type != "message" {
			continue
		}
		if _, err := jsonrpc.Decode(ev.Data); err != nil {
			continue
		}
		return ev.Data, nil
	}
}

// Close ends the stream.
func (c *sseConn) Close() error {
	c.once.Do(func() {
		c.cancel()
		c.body.Close()
	})
	return nil
}

// piped reports whether requests go to the in-process Handler (stdio,
// sse, or auto once the upstream was found to be legacy).
func (c *Client) piped() bool {
	return c.pipe != nil && (c.auto == nil || c.auto.sse.Load())
}

// PipeStats returns what the in-process Handler of a stdio or HTTP+SSE
// upstream ran (a stdio upstream's processes, an HTTP+SSE upstream's
// streams), since the Client was made; false for a Streamable HTTP
// upstream.
func (c *Client) PipeStats() (pipe.Stats, bool) {
	if c.pipe == nil {
		return pipe.Stats{}, false
	}
	return c.pipe.Stats(), true
}
