package testkit

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// lbBackendServer starts a backend that answers with its name, the request's
// Content-Length and body, and its Host header.
func lbBackendServer(t *testing.T, name string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %d %s host=%s te=%v", name, r.URL.RequestURI(), r.ContentLength, body, r.Host, r.TransferEncoding)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func lbGet(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestLBRoundRobin(t *testing.T) {
	backends := []string{lbBackendServer(t, "b0"), lbBackendServer(t, "b1"), lbBackendServer(t, "b2")}
	lb := StartLB(t, backends)
	c := &http.Client{Timeout: 5 * time.Second}

	var got []string
	for range 6 {
		_, body := lbGet(t, c, lb.URL+"/x?q=1")
		got = append(got, strings.Fields(body)[0])
	}
	if diff := cmp.Diff([]string{"b0", "b1", "b2", "b0", "b1", "b2"}, got); diff != "" {
		t.Errorf("rotation mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2, 2, 2}, lb.Requests()); diff != "" {
		t.Errorf("Requests mismatch (-want +got):\n%s", diff)
	}

	// A POST body arrives whole, with its Content-Length, path, query and
	// the client's Host.
	resp, err := c.Post(lb.URL+"/mcp?a=b", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	host := strings.TrimPrefix(lb.URL, "http://")
	if want := `b0 /mcp?a=b 40 {"jsonrpc":"2.0","id":1,"method":"ping"} host=` + host + ` te=[]`; string(b) != want {
		t.Errorf("POST through the LB:\n got %s\nwant %s", b, want)
	}
	// The LB marks the entry done just after the client read the last
	// byte: wait for it.
	log := lb.WaitLog(t, 2*time.Second, func(log []LBRequest) bool { return log[len(log)-1].Done })
	if last := log[len(log)-1]; last.Backend != 0 || last.Method != "POST" || last.RPCMethod != "ping" || last.Status != 200 || !last.Done || last.Err != "" {
		t.Errorf("last log entry = %+v", last)
	}

	// Removed backends leave the rotation; Restore brings them back.
	lb.Remove(1)
	got = nil
	for range 4 {
		_, body := lbGet(t, c, lb.URL+"/")
		got = append(got, strings.Fields(body)[0])
	}
	if diff := cmp.Diff([]string{"b2", "b0", "b2", "b0"}, got); diff != "" {
		t.Errorf("rotation after Remove(1) mismatch (-want +got):\n%s", diff)
	}
	lb.Remove(0)
	lb.Remove(2)
	if status, _ := lbGet(t, c, lb.URL+"/"); status != http.StatusServiceUnavailable {
		t.Errorf("no backend in rotation: %d, want 503", status)
	}
	lb.Restore(1)
	if _, body := lbGet(t, c, lb.URL+"/"); !strings.HasPrefix(body, "b1 ") {
		t.Errorf("after Restore(1): %q", body)
	}

	// SetBackends replaces the list and resets the counts.
	lb.SetBackends(t, backends[2:])
	if _, body := lbGet(t, c, lb.URL+"/"); !strings.HasPrefix(body, "b2 ") {
		t.Errorf("after SetBackends: %q", body)
	}
	if diff := cmp.Diff([]int{1}, lb.Requests()); diff != "" {
		t.Errorf("Requests after SetBackends mismatch (-want +got):\n%s", diff)
	}
}

func TestLBDeadBackendIs502(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	lb := StartLB(t, []string{deadURL})
	status, _ := lbGet(t, &http.Client{Timeout: 5 * time.Second}, lb.URL+"/mcp")
	if status != http.StatusBadGateway {
		t.Errorf("dead backend: %d, want 502", status)
	}
	if e := lb.Log()[0]; e.Backend != 0 || e.Status != 0 || !e.Done || !strings.Contains(e.Err, "unreachable") {
		t.Errorf("log entry = %+v", e)
	}
}

// TestLBStreamsEventByEvent checks that each SSE event reaches the client
// before the backend writes the next one.
func TestLBStreamsEventByEvent(t *testing.T) {
	next := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := range 3 {
			fmt.Fprintf(w, "event: message\ndata: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Second):
				return
			}
		}
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	lb := StartLB(t, []string{srv.URL})

	resp, err := http.Get(lb.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	for i := range 3 {
		// The backend waits for next before writing event i+1, so reading
		// event i here proves it was relayed on its own.
		var data string
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = d
				break
			}
		}
		if data != fmt.Sprint(i) {
			t.Fatalf("event %d: data %q (scan error %v)", i, data, sc.Err())
		}
		next <- struct{}{}
	}
}

// TestLBBrokenResponseAbortsClient checks that a backend dying mid-response
// is not passed off as a complete response.
func TestLBBrokenResponseAbortsClient(t *testing.T) {
	wrote := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: 1\n\n")
		w.(http.Flusher).Flush()
		close(wrote)
		<-r.Context().Done()
	}))
	lb := StartLB(t, []string{srv.URL})

	resp, err := http.Get(lb.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-wrote
	srv.CloseClientConnections() // the backend "dies"
	srv.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("the client read a clean end of a broken response: %q", body)
	}
	if string(body) != "event: message\ndata: 1\n\n" {
		t.Errorf("relayed before the break: %q", body)
	}
	e := lb.WaitLog(t, 5*time.Second, func(log []LBRequest) bool { return log[0].Done })[0]
	if e.Status != 200 || !strings.Contains(e.Err, "broke off") {
		t.Errorf("log entry = %+v", e)
	}
}

// TestLBClientGone checks that a client leaving mid-response is not taken
// for a backend failure.
func TestLBClientGone(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: 1\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	lb := StartLB(t, []string{srv.URL})

	resp, err := http.Get(lb.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // before the end of the stream
	e := lb.WaitLog(t, 5*time.Second, func(log []LBRequest) bool { return log[0].Done })[0]
	if !e.ClientGone || e.Err != "" || e.Status != 200 {
		t.Errorf("log entry = %+v", e)
	}
}

// TestLBReadinessCheck: a backend whose readiness check fails leaves the
// rotation, and comes back once it passes; one whose check cannot be
// reached is out too.
func TestLBReadinessCheck(t *testing.T) {
	var ready [2]atomic.Bool
	var checked [2]atomic.Int64 // requests to each readiness URL
	ready[0].Store(true)
	ready[1].Store(true)
	var readyURLs []string
	for i := range ready {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			checked[i].Add(1)
			if !ready[i].Load() {
				http.Error(w, "draining", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		}))
		t.Cleanup(srv.Close)
		readyURLs = append(readyURLs, srv.URL+"/readyz")
	}
	lb := StartLB(t, []string{lbBackendServer(t, "b0"), lbBackendServer(t, "b1"), lbBackendServer(t, "b2")})
	// b2's check has nothing listening behind it.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	const interval = 20 * time.Millisecond
	lb.CheckReadiness(t, append(readyURLs, dead.URL+"/readyz"), interval)
	if diff := cmp.Diff([]bool{true, true, false}, lb.InRotation()); diff != "" {
		t.Errorf("after the first round, InRotation mismatch (-want +got):\n%s", diff)
	}

	waitRotation := func(want []bool) {
		t.Helper()
		// The checks run on the real clock, every interval.
		if !Poll(2*time.Second, func() bool { return cmp.Equal(want, lb.InRotation()) }) {
			t.Fatalf("InRotation = %v, want %v within 2s", lb.InRotation(), want)
		}
	}
	names := func(n int) []string {
		c := &http.Client{Timeout: 5 * time.Second}
		var got []string
		for range n {
			_, body := lbGet(t, c, lb.URL+"/x")
			got = append(got, strings.Fields(body)[0])
		}
		return got
	}
	ready[0].Store(false)
	waitRotation([]bool{false, true, false})
	if diff := cmp.Diff([]string{"b1", "b1", "b1"}, names(3)); diff != "" {
		t.Errorf("with b0 unready, rotation mismatch (-want +got):\n%s", diff)
	}
	ready[0].Store(true)
	waitRotation([]bool{true, true, false})
	// Remove wins over a passing check.
	lb.Remove(1)
	// b1's check is asked twice more: the round that asked it first after
	// the Remove has then applied its (passing) result.
	removedAt := checked[1].Load()
	if !Poll(2*time.Second, func() bool { return checked[1].Load() >= removedAt+2 }) {
		t.Fatal("b1's readiness check did not run twice after the Remove")
	}
	if diff := cmp.Diff([]string{"b0", "b0"}, names(2)); diff != "" {
		t.Errorf("with b1 removed, rotation mismatch (-want +got):\n%s", diff)
	}
	lb.Close() // stops the checks and waits for them
}
