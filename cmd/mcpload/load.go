package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// config is one load run. [parseFlags] fills it from the command line.
type config struct {
	URL      string
	Clients  int
	Duration time.Duration // measured, after Warmup
	Warmup   time.Duration
	Timeout  time.Duration // per request, response body included
	Mode     string        // modeCall, modeList or modeMix
	// ListRatio is the share of tools/list requests in modeMix.
	ListRatio float64
	Tool      string
	// BodyArg, if set, nests the text argument in an object argument of
	// that name: {"body":{"text":...}}, the shape of an OpenAPI
	// operation's JSON request body served as a tool.
	BodyArg  string
	Payload  int    // bytes of the echo text
	Fill     string // what fills it: fillX or fillProse
	Protocol string
	// Header holds extra headers (-H, -token) sent on every request.
	Header http.Header
	// CheckEcho requires a tool result's text to equal what was sent.
	CheckEcho bool
	// ExpectTools, when positive, is how many tools tools/list must return.
	ExpectTools int
	// AllowRemote permits connections to non-loopback addresses.
	AllowRemote bool
}

const (
	modeCall = "call"
	modeList = "list"
	modeMix  = "mix"
)

// errNotLoopback is returned by the dialer for a non-loopback address
// without -allow-remote.
var errNotLoopback = errors.New("refusing to connect to a non-loopback address without -allow-remote")

// newTransport returns the keep-alive transport shared by all virtual
// clients: as many idle connections as clients, so that each client keeps
// its connection (a client has one request in flight at a time), no
// environment proxy, no compression, and, unless allowRemote, a dialer that
// refuses any address that is not loopback (a hostname might resolve to
// one).
func newTransport(clients int, allowRemote bool) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if !allowRemote {
		d.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("%w: %s", errNotLoopback, address)
			}
			return nil
		}
	}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         d.DialContext,
		MaxIdleConns:        clients + 16,
		MaxIdleConnsPerHost: clients + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// newHTTPClient returns the client of a run over tr: it bounds each request
// by timeout and follows no redirects (a redirect counts as a bad status:
// MCP endpoints do not redirect, and following one could leave loopback).
func newHTTPClient(tr http.RoundTripper, timeout time.Duration) *http.Client {
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// stats are what one virtual client measured; merged into a [report].
// Latencies go to a histogram shared with other clients (see [histShard]).
type stats struct {
	requests int64 // measured requests, failed ones included
	ok       int64 // measured requests that passed every check
	calls    int64
	lists    int64
	errors   map[string]int64
	samples  map[string]string // first message of each error kind
	tools    int               // tools in the last tools/list result
}

func (s *stats) fail(ce *checkError) {
	if s.errors == nil {
		s.errors = make(map[string]int64)
		s.samples = make(map[string]string)
	}
	s.errors[ce.kind]++
	if _, ok := s.samples[ce.kind]; !ok {
		s.samples[ce.kind] = ce.msg
	}
}

// vclient is one virtual client: its own MCP session, one request at a
// time. Its buffers are reused from request to request, so that its own
// cost stays small and the same whatever the target.
type vclient struct {
	cfg     *config
	http    *http.Client
	index   int
	tool    []byte // the tool name as a JSON string
	fill    []byte // 'x' * cfg.Payload
	session string
	version string // negotiated protocol version
	nextID  int64
	body    bytes.Buffer
	resp    bytes.Buffer
	text    []byte
	st      stats
	hist    *histShard
}

// histShard is a histogram shared by some clients. A histogram is about
// 115 KB, so clients share [maxHistShards] of them rather than each having
// its own: memory stays constant for any -c, and with one request at a time
// per client, a shard's lock is rarely contended.
type histShard struct {
	mu sync.Mutex
	h  histogram
}

const maxHistShards = 64

func (s *histShard) record(d time.Duration) {
	s.mu.Lock()
	s.h.record(d)
	s.mu.Unlock()
}

// maxInitInFlight bounds the sessions being opened at once, so that a run
// with thousands of clients does not start by flooding the server.
const maxInitInFlight = 256

// post sends one JSON-RPC message (c.body) and reads the whole response
// into c.resp. It returns the time from sending to the end of the body.
func (c *vclient) post(ctx context.Context, withSession bool) (*http.Response, time.Duration, *checkError) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL, bytes.NewReader(c.body.Bytes()))
	if err != nil {
		return nil, 0, failf(errTransport, "%v", err)
	}
	for k, v := range c.cfg.Header {
		req.Header[k] = v
	}
	req.Header["Content-Type"] = []string{"application/json"}
	req.Header["Accept"] = []string{"application/json, text/event-stream"}
	if withSession {
		if c.session != "" {
			req.Header["Mcp-Session-Id"] = []string{c.session}
		}
		req.Header["Mcp-Protocol-Version"] = []string{c.version}
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, time.Since(start), classify(err)
	}
	c.resp.Reset()
	_, err = c.resp.ReadFrom(resp.Body)
	resp.Body.Close()
	lat := time.Since(start)
	if err != nil {
		if ce := classify(err); ce.kind == errTimeout {
			return nil, lat, ce
		}
		return nil, lat, failf(errRead, "after %d bytes: %v", c.resp.Len(), err)
	}
	return resp, lat, nil
}

// classify names the error of a failed round trip.
func classify(err error) *checkError {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return failf(errTimeout, "%v", err)
	}
	return failf(errTransport, "%v", err)
}

// rpc posts the request in c.body with the given id and returns its checked
// JSON-RPC response.
func (c *vclient) rpc(ctx context.Context, id int64, withSession bool) (*http.Response, *response, time.Duration, *checkError) {
	resp, lat, ce := c.post(ctx, withSession)
	if ce != nil {
		return nil, nil, lat, ce
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, lat, failf(errStatus, "%d: %.200s", resp.StatusCode, bytes.TrimSpace(c.resp.Bytes()))
	}
	r, ce := findResponse(resp.Header.Get("Content-Type"), c.resp.Bytes(), id)
	return resp, r, lat, ce
}

// initialize opens the client's session: initialize, then
// notifications/initialized.
func (c *vclient) initialize(ctx context.Context) *checkError {
	c.nextID++
	id := c.nextID
	c.body.Reset()
	fmt.Fprintf(&c.body, `{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"mcpload","version":"1.0.0"}}}`, id, c.cfg.Protocol)
	resp, r, _, ce := c.rpc(ctx, id, false)
	if ce == nil {
		ce = checkResult(r)
	}
	if ce != nil {
		return &checkError{kind: errInit, msg: "initialize: " + ce.Error()}
	}
	c.session = resp.Header.Get("Mcp-Session-Id")
	c.version = r.Result.ProtocolVersion
	if c.version == "" {
		c.version = c.cfg.Protocol
	}
	c.body.Reset()
	c.body.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp, _, ce = c.post(ctx, true)
	if ce != nil {
		return &checkError{kind: errInit, msg: "notifications/initialized: " + ce.Error()}
	}
	if resp.StatusCode/100 != 2 {
		return failf(errInit, "notifications/initialized: status %d: %.200s", resp.StatusCode, bytes.TrimSpace(c.resp.Bytes()))
	}
	return nil
}

// isList reports whether request k (from 0) of a client is a tools/list:
// in mix mode, ratio of them, spread evenly.
func isList(mode string, ratio float64, k int64) bool {
	switch mode {
	case modeList:
		return true
	case modeMix:
		return math.Floor(float64(k+1)*ratio) > math.Floor(float64(k)*ratio)
	}
	return false
}

// one sends request k and checks its response. It returns the latency and
// whether it was a tools/list.
func (c *vclient) one(ctx context.Context, k int64) (time.Duration, bool, *checkError) {
	c.nextID++
	id := c.nextID
	c.body.Reset()
	list := isList(c.cfg.Mode, c.cfg.ListRatio, k)
	if list {
		c.body.WriteString(`{"jsonrpc":"2.0","id":`)
		c.body.WriteString(strconv.FormatInt(id, 10))
		c.body.WriteString(`,"method":"tools/list","params":{}}`)
	} else {
		// The text is unique to the request ("<client>-<id>:xxx...", cut
		// to the payload size) so that an answer meant for another request
		// cannot pass the echo check. It needs no JSON escaping.
		c.text = strconv.AppendInt(c.text[:0], int64(c.index), 10)
		c.text = append(c.text, '-')
		c.text = strconv.AppendInt(c.text, id, 10)
		c.text = append(c.text, ':')
		c.text = append(c.text, c.fill...)
		c.text = c.text[:c.cfg.Payload]
		c.body.WriteString(`{"jsonrpc":"2.0","id":`)
		c.body.WriteString(strconv.FormatInt(id, 10))
		c.body.WriteString(`,"method":"tools/call","params":{"name":`)
		c.body.Write(c.tool)
		c.body.WriteString(`,"arguments":{`)
		if c.cfg.BodyArg != "" {
			c.body.WriteString(strconv.Quote(c.cfg.BodyArg))
			c.body.WriteString(`:{`)
		}
		c.body.WriteString(`"text":"`)
		c.body.Write(c.text)
		c.body.WriteString(`"}}}`)
		if c.cfg.BodyArg != "" {
			c.body.WriteByte('}')
		}
	}
	_, r, lat, ce := c.rpc(ctx, id, true)
	if ce != nil {
		return lat, list, ce
	}
	if list {
		n, ce := checkList(r, c.cfg.ExpectTools)
		c.st.tools = n
		return lat, true, ce
	}
	return lat, false, checkCall(r, c.cfg.CheckEcho, c.text)
}

// deleteSession ends the client's session, best effort: a server that
// answers 405 keeps it until it expires.
func (c *vclient) deleteSession(ctx context.Context) {
	if c.session == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.cfg.URL, nil)
	if err != nil {
		return
	}
	for k, v := range c.cfg.Header {
		req.Header[k] = v
	}
	req.Header["Mcp-Session-Id"] = []string{c.session}
	req.Header["Mcp-Protocol-Version"] = []string{c.version}
	if resp, err := c.http.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// runLoad runs cfg against its URL with hc: every client initializes its
// session, then all loop together for cfg.Warmup (not measured) and
// cfg.Duration (measured), then end their sessions. It stops early when ctx
// is done. Only a run in which no client could initialize is an error;
// every other failure is counted in the report.
func runLoad(ctx context.Context, cfg *config, hc *http.Client) (*report, error) {
	tool, err := json.Marshal(cfg.Tool)
	if err != nil {
		return nil, err
	}
	fill := fillText(cfg.Fill, cfg.Payload)
	shards := make([]histShard, min(cfg.Clients, maxHistShards))
	clients := make([]*vclient, cfg.Clients)
	for i := range clients {
		clients[i] = &vclient{cfg: cfg, http: hc, index: i, tool: tool, fill: fill, text: make([]byte, 0, cfg.Payload+32), hist: &shards[i%len(shards)]}
	}

	// Open every session first, so that the measured loop is only the
	// requests (and the sessions' creation cost is left out of it).
	var wg sync.WaitGroup
	initErrs := make([]*checkError, len(clients))
	sem := make(chan struct{}, maxInitInFlight)
	for i, c := range clients {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			initErrs[i] = c.initialize(ctx)
		})
	}
	wg.Wait()
	var ready []*vclient
	var firstInitErr *checkError
	for i, c := range clients {
		if ce := initErrs[i]; ce != nil {
			c.st.fail(ce)
			if firstInitErr == nil {
				firstInitErr = ce
			}
			continue
		}
		ready = append(ready, c)
	}
	if len(ready) == 0 {
		return nil, fmt.Errorf("no client could open a session: %v", firstInitErr)
	}

	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	for _, c := range ready {
		wg.Go(func() {
			for k := int64(0); ; k++ {
				sent := time.Now()
				if !sent.Before(end) || ctx.Err() != nil {
					return
				}
				lat, list, ce := c.one(ctx, k)
				if ctx.Err() != nil {
					return // interrupted: the request did not fail on its own
				}
				if ce != nil {
					c.st.fail(ce)
				}
				if sent.Before(measureFrom) {
					continue
				}
				// A request counts in the window it was sent in: in a
				// steady state, sends and completions have the same rate.
				c.st.requests++
				if list {
					c.st.lists++
				} else {
					c.st.calls++
				}
				if ce == nil {
					c.st.ok++
					c.hist.record(lat)
				}
			}
		})
	}
	wg.Wait()
	stopped := time.Now()
	for _, c := range ready {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c.deleteSession(context.WithoutCancel(ctx))
		})
	}
	wg.Wait()

	if stopped.After(end) {
		stopped = end
	}
	measured := max(stopped.Sub(measureFrom), 0)
	rep := newReport(cfg, clients, len(ready), measured)
	for i := range shards {
		rep.hist.merge(&shards[i].h)
	}
	rep.computeLatency()
	return rep, nil
}

// The fills of the echo text.
const (
	fillX     = "x"     // "xxx...": nothing for a content guard to look at
	fillProse = "prose" // a tracker's issue text: words, numbers, URLs, dates
)

// proseLine is one line of the prose fill: what a tool result is made of,
// with digits, versions, URLs and dates a content guard must look at and
// let pass. It needs no JSON escaping.
const proseLine = "Crash in the exporter when batch 7 exceeds the limit: run it with 3 workers, v1.4.2, " +
	"then wait 30s; it exits with code 137. See https://tracker.example.com/acme/api/issues/4107 (opened 2025-03-08T10:07:00Z by dev-7). "

// fillText returns n bytes of fill kind.
func fillText(kind string, n int) []byte {
	if kind == fillProse {
		return bytes.Repeat([]byte(proseLine), n/len(proseLine)+1)[:n]
	}
	return bytes.Repeat([]byte("x"), n)
}
