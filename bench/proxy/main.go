// Command proxy is the "bare reverse proxy" baseline of the benchmarks (see
// bench/README.md): a net/http/httputil.ReverseProxy in front of one
// upstream that understands nothing of MCP. The gateway's cost is measured
// against this hop.
//
//	go run ./bench/proxy -addr 127.0.0.1:0 -upstream http://127.0.0.1:PORT
//
// It prints "listening on http://ADDR" once it accepts connections; the
// request path passes through unchanged, so the MCP endpoint is at
// http://ADDR/mcp when the upstream's is at /mcp.
//
// To be a fair and correct baseline rather than a strawman, it has the two
// fixes an MCP deployment of ReverseProxy needs:
//
//   - The request body is read into memory (bounded by -max-body) before
//     forwarding, and sent with its Content-Length and a GetBody. A plain
//     ReverseProxy streams the body from the incoming request; once the
//     upstream has answered, the server side closes that body, the proxy's
//     last read of it fails and the upstream connection is dropped
//     mid-response: about 1% of SSE responses came back truncated on
//     loopback (Go issue 40747). Buffering a JSON-RPC message costs one
//     small copy, which any gateway pays too.
//   - FlushInterval is -1: every write of an SSE stream is flushed at once,
//     as a streaming MCP answer must be.
//
// Its upstream transport keeps as many idle connections per host as
// -max-idle (the default of 2 would make it open and close connections
// under any concurrency, and measure that instead).
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/mcpgw/gateway/internal/cli"
)

func main() { cli.Main("proxy", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("proxy", stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0 picks a free port)")
	upstream := fs.String("upstream", "", "the upstream's origin, such as http://127.0.0.1:9001 (required; the request path is kept)")
	maxBody := fs.Int64("max-body", 4<<20, "largest request body accepted, in bytes (413 beyond)")
	maxIdle := fs.Int("max-idle", 1024, "idle connections kept to the upstream")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	target, err := url.Parse(*upstream)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return fmt.Errorf("-upstream must be an absolute http(s) URL, got %q", *upstream)
	}
	if target.Path != "" && target.Path != "/" {
		return fmt.Errorf("-upstream must be an origin without a path (the request path is kept), got %q", *upstream)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           newProxy(target, *maxBody, *maxIdle),
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Fprintf(stdout, "listening on http://%s -> %s\n", ln.Addr(), target)
	return cli.Serve(ctx, srv, ln)
}

// newProxy returns the bare reverse proxy to target, with the body
// buffering and flushing described in the package comment.
func newProxy(target *url.URL, maxBody int64, maxIdle int) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = "" // the upstream's own host, as a client of it would send
		},
		FlushInterval: -1,
		Transport: &http.Transport{
			Proxy:               nil, // never an environment proxy, even for a remote upstream
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        maxIdle,
			MaxIdleConnsPerHost: maxIdle,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // pass Accept-Encoding through, decode nothing
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
			if err != nil {
				if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
					http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
					return
				}
				http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			// Issue 40747: forward a body that no longer depends on the
			// incoming connection, with its length, and replayable so that
			// the transport may retry on a stale keep-alive connection.
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.TransferEncoding = nil // sent with Content-Length, never chunked
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			if len(body) == 0 {
				r.Body = http.NoBody
			}
		}
		rp.ServeHTTP(w, r)
	})
}
