package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxLBBody bounds the request body an [LB] buffers; larger bodies get 413.
const maxLBBody = 64 << 20

// hopHeaders are the hop-by-hop headers (RFC 9110 section 7.6.1) a proxy
// does not forward.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// LBRequest is one request an [LB] forwarded, or tried to.
type LBRequest struct {
	Backend   int    // index of the backend it went to, in the list StartLB or SetBackends set
	Method    string // HTTP method
	Path      string // URL path
	RPCMethod string // JSON-RPC method of the body, as in [RecordedRequest]
	SessionID string // the Mcp-Session-Id request header
	// Status is the backend's HTTP status, or 0 while the response headers
	// have not arrived (or never did: see Err).
	Status int
	// Err, if not empty, says how forwarding failed on the backend's side:
	// the backend could not be reached (the client got 502) or its response
	// broke off mid-way (the client's connection was aborted too).
	Err string
	// ClientGone is set if the client went away (closed the connection,
	// cancelled the request) before the response was relayed to its end;
	// that is not the backend's failure, and Err stays empty.
	ClientGone bool
	// Done is set once the response has been relayed to its end, or has
	// failed.
	Done bool
}

// An LB is a round-robin HTTP load balancer on 127.0.0.1, like a plain
// load balancer in front of gateway replicas: each request goes to the next
// backend in rotation, with no stickiness at all. It reads the whole request
// body before forwarding it with its Content-Length (a body streamed from
// the incoming request is closed by net/http once the backend has answered,
// and the last read of it drops the backend's connection mid-response: Go
// issue 40747), and relays the response as it arrives, flushing after every
// read, so an SSE stream passes event by event. When a backend cannot be
// reached the client gets 502; when a backend's response breaks off, the
// client's connection is aborted too, so a truncated body never looks
// complete.
//
// Backends are base URLs ("http://127.0.0.1:PORT"); the request's path and
// query are appended. The Host header is passed through as the client sent
// it, and X-Forwarded-For and X-Forwarded-Proto are set.
//
// All methods are safe for concurrent use.
type LB struct {
	URL string // http://127.0.0.1:PORT

	srv       *httptest.Server
	transport *http.Transport
	close     sync.Once

	mu       sync.Mutex
	backends []lbBackend
	gen      int // incremented by SetBackends, so that a check of an old list is dropped
	next     int // rotation position
	log      []LBRequest
	logged   chan struct{} // closed, and replaced, on every change of log
	checks   *lbChecks     // nil until CheckReadiness
}

type lbBackend struct {
	url      string
	out      bool   // removed from rotation by Remove
	readyURL string // polled by the readiness check; "" for none
	unready  bool   // out of rotation: its last readiness check failed
	requests int
}

// lbChecks is the readiness check's goroutine, which Close stops and waits
// for.
type lbChecks struct {
	stop chan struct{}
	done chan struct{}
}

// StartLB starts a load balancer in front of backends (which may be empty:
// see [LB.SetBackends]), stopped at the end of the test.
func StartLB(t testing.TB, backends []string) *LB {
	t.Helper()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Pass bodies through as they are: the transport would otherwise ask
	// for gzip and decompress behind the client's back.
	transport.DisableCompression = true
	transport.MaxIdleConnsPerHost = 64
	transport.DialContext = (&net.Dialer{Timeout: 2 * time.Second}).DialContext
	lb := &LB{transport: transport, logged: make(chan struct{})}
	lb.setBackends(t, backends)
	lb.srv = httptest.NewServer(http.HandlerFunc(lb.serveHTTP))
	lb.URL = lb.srv.URL
	t.Cleanup(lb.Close)
	return lb
}

// SetBackends replaces the backends, all in rotation, and resets the
// request counts: indexes in [LB.Requests], [LB.Remove] and [LBRequest]
// refer to the new list from now on. Requests in flight are not affected.
func (lb *LB) SetBackends(t testing.TB, backends []string) {
	t.Helper()
	lb.setBackends(t, backends)
}

func (lb *LB) setBackends(t testing.TB, backends []string) {
	t.Helper()
	list := make([]lbBackend, 0, len(backends))
	for _, b := range backends {
		if !strings.HasPrefix(b, "http://") || strings.Count(b, "/") > 2 {
			t.Fatalf("testkit: LB backend %q: want a base URL http://HOST:PORT", b)
		}
		list = append(list, lbBackend{url: b})
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.backends = list
	lb.gen++
	lb.next = 0
}

// CheckReadiness makes the LB check each backend's readiness every
// interval, as a load balancer with a health check does: a backend is out
// of rotation from its first check that fails (any status but 200, or no
// answer within interval) until one succeeds. urls[i] is backend i's
// readiness URL (such as "http://ADMIN/readyz"), "" for none; it must have
// one entry per backend. The first round of checks is done when
// CheckReadiness returns. [LB.SetBackends] drops the URLs (call
// CheckReadiness again); the checks stop when the LB closes. A backend
// taken out by [LB.Remove] stays out whatever its checks say.
func (lb *LB) CheckReadiness(t testing.TB, urls []string, interval time.Duration) {
	t.Helper()
	lb.mu.Lock()
	if len(urls) != len(lb.backends) {
		lb.mu.Unlock()
		t.Fatalf("testkit: CheckReadiness: %d URLs for %d backends", len(urls), len(lb.backends))
	}
	for i := range lb.backends {
		lb.backends[i].readyURL = urls[i]
		lb.backends[i].unready = false
	}
	start := lb.checks == nil
	if start {
		lb.checks = &lbChecks{stop: make(chan struct{}), done: make(chan struct{})}
	}
	checks := lb.checks
	lb.mu.Unlock()
	client := &http.Client{Timeout: interval}
	lb.checkRound(client)
	if start {
		go lb.checkLoop(client, interval, checks)
	}
}

// InRotation reports, by index, which backends get requests: those neither
// removed nor failing their readiness check.
func (lb *LB) InRotation() []bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	in := make([]bool, len(lb.backends))
	for i, b := range lb.backends {
		in[i] = !b.out && !b.unready
	}
	return in
}

func (lb *LB) checkLoop(client *http.Client, interval time.Duration, c *lbChecks) {
	defer close(c.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
			lb.checkRound(client)
		}
	}
}

// checkRound checks every backend that has a readiness URL, one after the
// other, and updates its state.
func (lb *LB) checkRound(client *http.Client) {
	lb.mu.Lock()
	gen := lb.gen
	urls := make([]string, len(lb.backends))
	for i, b := range lb.backends {
		urls[i] = b.readyURL
	}
	lb.mu.Unlock()
	for i, u := range urls {
		if u == "" {
			continue
		}
		ok := false
		if resp, err := client.Get(u); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK
		}
		lb.mu.Lock()
		if lb.gen == gen {
			lb.backends[i].unready = !ok
		}
		lb.mu.Unlock()
	}
}

// Remove takes backend i out of rotation, as a health-checking load
// balancer does with a dead replica. Requests already forwarded to it are
// not affected. Removing a backend twice is a no-op.
func (lb *LB) Remove(i int) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.backends[i].out = true
}

// Restore puts backend i back in rotation.
func (lb *LB) Restore(i int) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.backends[i].out = false
}

// Requests returns how many requests each backend was sent, by index.
func (lb *LB) Requests() []int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	n := make([]int, len(lb.backends))
	for i, b := range lb.backends {
		n[i] = b.requests
	}
	return n
}

// Log returns every request the LB received since it started, oldest
// first, with where it went and how it ended. A request no backend could
// take (none in rotation) has Backend -1.
func (lb *LB) Log() []LBRequest {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return slices.Clone(lb.log)
}

// WaitLog waits until cond holds for the log (as [LB.Log] returns it),
// checking it again on every change of the log, and returns that log. It
// fails the test if cond does not hold within timeout; it must be called
// from the test's goroutine.
func (lb *LB) WaitLog(t testing.TB, timeout time.Duration, cond func([]LBRequest) bool) []LBRequest {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		lb.mu.Lock()
		log, logged := slices.Clone(lb.log), lb.logged
		lb.mu.Unlock()
		if cond(log) {
			return log
		}
		select {
		case <-logged:
		case <-timer.C:
			t.Fatalf("testkit: the LB log did not get there in %v: %+v", timeout, log)
		}
	}
}

// loggedLocked wakes the waiters of [LB.WaitLog]; lb.mu is held.
func (lb *LB) loggedLocked() {
	close(lb.logged)
	lb.logged = make(chan struct{})
}

// Close stops the load balancer, dropping every connection. It is called at
// the end of the test and may be called more than once.
func (lb *LB) Close() {
	lb.close.Do(func() {
		lb.mu.Lock()
		checks := lb.checks
		lb.mu.Unlock()
		if checks != nil {
			close(checks.stop)
			<-checks.done
		}
		lb.srv.CloseClientConnections()
		lb.srv.Close()
		lb.transport.CloseIdleConnections()
	})
}

// pick chooses the next backend in rotation and logs the request; it
// returns the backend's URL ("" if none is in rotation) and the request's
// index in the log.
func (lb *LB) pick(entry LBRequest) (target string, logIndex int) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	entry.Backend = -1
	for range lb.backends {
		i := lb.next % len(lb.backends)
		lb.next = i + 1
		if !lb.backends[i].out && !lb.backends[i].unready {
			lb.backends[i].requests++
			entry.Backend, target = i, lb.backends[i].url
			break
		}
	}
	lb.log = append(lb.log, entry)
	lb.loggedLocked()
	return target, len(lb.log) - 1
}

// update edits log entry i.
func (lb *LB) update(i int, edit func(*LBRequest)) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	edit(&lb.log[i])
	lb.loggedLocked()
}

func (lb *LB) serveHTTP(w http.ResponseWriter, r *http.Request) {
	// Read the whole body before forwarding anything, so that the backend
	// gets it with a Content-Length and nothing reads the client's body
	// after the backend has answered.
	body, err := io.ReadAll(io.LimitReader(r.Body, maxLBBody+1))
	if err != nil {
		http.Error(w, "testkit LB: reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxLBBody {
		http.Error(w, "testkit LB: request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	target, li := lb.pick(LBRequest{Method: r.Method, Path: r.URL.Path, RPCMethod: rpcMethods(body), SessionID: r.Header.Get("Mcp-Session-Id")})
	if target == "" {
		lb.update(li, func(e *LBRequest) { e.Err, e.Done = "no backend in rotation", true })
		http.Error(w, "testkit LB: no backend in rotation", http.StatusServiceUnavailable)
		return
	}

	out, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		lb.update(li, func(e *LBRequest) { e.Err, e.Done = err.Error(), true })
		http.Error(w, "testkit LB: "+err.Error(), http.StatusBadGateway)
		return
	}
	if len(body) == 0 {
		out.Body, out.GetBody, out.ContentLength = http.NoBody, nil, 0
	}
	out.Header = r.Header.Clone()
	removeHopHeaders(out.Header)
	out.Host = r.Host
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			host = strings.Join(prior, ", ") + ", " + host
		}
		out.Header.Set("X-Forwarded-For", host)
	}
	out.Header.Set("X-Forwarded-Proto", "http")

	resp, err := lb.transport.RoundTrip(out)
	if err != nil && r.Context().Err() != nil {
		lb.update(li, func(e *LBRequest) { e.ClientGone, e.Done = true, true })
		return
	}
	if err != nil {
		lb.update(li, func(e *LBRequest) { e.Err, e.Done = "backend unreachable: "+err.Error(), true })
		http.Error(w, "testkit LB: backend unreachable", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	lb.update(li, func(e *LBRequest) { e.Status = resp.StatusCode })

	removeHopHeaders(resp.Header)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				lb.update(li, func(e *LBRequest) { e.ClientGone, e.Done = true, true })
				return
			}
			_ = rc.Flush()
		}
		if errors.Is(rerr, io.EOF) {
			lb.update(li, func(e *LBRequest) { e.Done = true })
			return
		}
		if rerr != nil && r.Context().Err() != nil {
			lb.update(li, func(e *LBRequest) { e.ClientGone, e.Done = true, true })
			return
		}
		if rerr != nil {
			lb.update(li, func(e *LBRequest) {
				e.Err, e.Done = fmt.Sprintf("response broke off: %v", rerr), true
			})
			// Abort the client's connection: ending the response cleanly
			// would pass a truncated body off as a whole one.
			panic(http.ErrAbortHandler)
		}
	}
}

// removeHopHeaders deletes the hop-by-hop headers from h, including those
// its Connection header names.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}
