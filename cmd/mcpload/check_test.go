package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestFindResponse(t *testing.T) {
	const callOK = `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}]}}`
	tests := []struct {
		name        string
		contentType string
		body        string
		wantKind    string // "" for success
	}{
		{name: "json", contentType: "application/json", body: callOK},
		{name: "json with charset", contentType: "application/json; charset=utf-8", body: callOK},
		{name: "json other id", contentType: "application/json", body: `{"jsonrpc":"2.0","id":8,"result":{}}`, wantKind: errID},
		{name: "json string id", contentType: "application/json", body: `{"jsonrpc":"2.0","id":"7","result":{}}`, wantKind: errID},
		{name: "json not jsonrpc", contentType: "application/json", body: `{"id":7,"result":{}}`, wantKind: errParse},
		{name: "json garbage", contentType: "application/json", body: `{"jsonrpc":"2.0","id":7,`, wantKind: errParse},
		{name: "text/plain", contentType: "text/plain", body: callOK, wantKind: errContentType},
		{name: "no content type", contentType: "", body: callOK, wantKind: errContentType},
		{name: "sse", contentType: "text/event-stream", body: "event: message\nid: 1_0\ndata: " + callOK + "\n\n"},
		{name: "sse crlf", contentType: "text/event-stream", body: "event: message\r\ndata: " + callOK + "\r\n\r\n"},
		{name: "sse cr", contentType: "text/event-stream", body: "data: " + callOK + "\r\r"},
		{name: "sse no space after colon", contentType: "text/event-stream", body: "data:" + callOK + "\n\n"},
		{
			name:        "sse priming event, notification, comment, then response",
			contentType: "text/event-stream",
			body: "id: 0\ndata:\n\n" +
				": keep-alive\n\n" +
				`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}` + "\n\n" +
				`data: {"jsonrpc":"2.0","id":70,"result":{}}` + "\n\n" +
				"data: " + callOK + "\n\n",
		},
		{
			name:        "sse data split over lines",
			contentType: "text/event-stream",
			body:        "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":7,\"result\":{}}\n\n",
		},
		{name: "sse cut before the blank line", contentType: "text/event-stream", body: "data: " + callOK + "\n", wantKind: errNoResponse},
		{name: "sse cut mid-data", contentType: "text/event-stream", body: "data: " + callOK[:30], wantKind: errNoResponse},
		{name: "sse empty", contentType: "text/event-stream", body: "", wantKind: errNoResponse},
		{name: "sse other id only", contentType: "text/event-stream", body: `data: {"jsonrpc":"2.0","id":8,"result":{}}` + "\n\n", wantKind: errNoResponse},
		{name: "sse bad data", contentType: "text/event-stream", body: "data: {oops\n\n", wantKind: errParse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ce := findResponse(tt.contentType, []byte(tt.body), 7)
			if tt.wantKind != "" {
				if ce == nil || ce.kind != tt.wantKind {
					t.Fatalf("findResponse = %v, want kind %q", ce, tt.wantKind)
				}
				return
			}
			if ce != nil {
				t.Fatalf("findResponse: %v", ce)
			}
			if string(r.ID) != "7" {
				t.Errorf("id = %s, want 7", r.ID)
			}
		})
	}
}

func TestCheckCall(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		echo     bool
		wantKind string
	}{
		{name: "echo ok", body: `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"abc"}],"structuredContent":{"x":1}}}`, echo: true},
		{name: "echo other text", body: `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"abd"}]}}`, echo: true, wantKind: errEcho},
		{name: "echo escaped equal text", body: `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\u0061bc"}]}}`, echo: true},
		{name: "echo no content", body: `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, echo: true, wantKind: errEcho},
		{name: "echo image", body: `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"image","data":"abc"}]}}`, echo: true, wantKind: errEcho},
		{name: "not echo, other text", body: `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`},
		{name: "tool error", body: `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"boom"}],"isError":true}}`, wantKind: errToolError},
		{name: "rpc error", body: `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown tool"}}`, echo: true, wantKind: errRPC},
		{name: "null result", body: `{"jsonrpc":"2.0","id":1,"result":null}`, wantKind: errNoResult},
		{name: "no result", body: `{"jsonrpc":"2.0","id":1}`, wantKind: errNoResult},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ce := findResponse("application/json", []byte(tt.body), 1)
			if ce != nil {
				t.Fatal(ce)
			}
			ce = checkCall(r, tt.echo, []byte("abc"))
			if got := kindOf(ce); got != tt.wantKind {
				t.Errorf("checkCall = %v, want kind %q", ce, tt.wantKind)
			}
		})
	}
}

func TestCheckList(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		expect   int
		wantN    int
		wantKind string
	}{
		{name: "two", body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`, wantN: 2},
		{name: "two expected", body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`, expect: 2, wantN: 2},
		{name: "two, three expected", body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`, expect: 3, wantN: 2, wantKind: errTools},
		{name: "none", body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, wantKind: errTools},
		{name: "error", body: `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`, wantKind: errRPC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ce := findResponse("application/json", []byte(tt.body), 1)
			if ce != nil {
				t.Fatal(ce)
			}
			n, ce := checkList(r, tt.expect)
			if n != tt.wantN || kindOf(ce) != tt.wantKind {
				t.Errorf("checkList = %d, %v; want %d, kind %q", n, ce, tt.wantN, tt.wantKind)
			}
		})
	}
}

func kindOf(ce *checkError) string {
	if ce == nil {
		return ""
	}
	return ce.kind
}

func TestIsList(t *testing.T) {
	count := func(mode string, ratio float64, n int64) (lists int) {
		for k := range n {
			if isList(mode, ratio, k) {
				lists++
			}
		}
		return lists
	}
	if got := count(modeCall, 0.5, 100); got != 0 {
		t.Errorf("call mode: %d lists", got)
	}
	if got := count(modeList, 0, 100); got != 100 {
		t.Errorf("list mode: %d lists of 100", got)
	}
	for _, ratio := range []float64{0, 0.1, 0.25, 1.0 / 3, 0.5, 1} {
		if got, want := count(modeMix, ratio, 1000), int(math.Floor(1000*ratio)); got < want-1 || got > want+1 {
			t.Errorf("mix %.3f: %d lists of 1000, want %d", ratio, got, want)
		}
	}
}

func TestHistogramBuckets(t *testing.T) {
	// Buckets are contiguous and ordered, and every value falls in the
	// bucket whose range holds it.
	prevHi := uint64(0)
	for i := range histBuckets {
		lo, hi := bucketRange(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if hi < lo {
			t.Fatalf("bucket %d: [%d, %d]", i, lo, hi)
		}
		if i >= 2*histSub && float64(hi-lo+1)/float64(lo) > 1.0/histSub+1e-12 {
			t.Fatalf("bucket %d: [%d, %d] wider than 1/%d of its start", i, lo, hi, histSub)
		}
		for _, v := range []uint64{lo, hi, lo + (hi-lo)/2} {
			if got := bucketOf(v); got != i {
				t.Fatalf("bucketOf(%d) = %d, want %d", v, got, i)
			}
		}
		prevHi = hi
	}
	if prevHi != math.MaxUint64>>1 && prevHi != math.MaxUint64 {
		t.Errorf("last bucket ends at %d", prevHi)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	// Compare with the exact nearest-rank percentiles of the sorted
	// samples: a log-normal-ish spread from 50µs to 50ms, with outliers.
	var samples []time.Duration
	x := uint64(12345)
	for range 20000 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		u := float64(x%1_000_000) / 1_000_000
		samples = append(samples, time.Duration(50_000*math.Pow(1000, u*u*u)))
	}
	samples = append(samples, 3*time.Second, 7) // an outlier and a 7ns sample
	var h, a, b histogram
	for i, s := range samples {
		h.record(s)
		if i%2 == 0 {
			a.record(s)
		} else {
			b.record(s)
		}
	}
	a.merge(&b)
	slices.Sort(samples)
	exact := func(q float64) time.Duration {
		rank := int(math.Ceil(q * float64(len(samples))))
		return samples[max(rank, 1)-1]
	}
	for _, q := range []float64{0.0001, 0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		want := exact(q)
		for name, hh := range map[string]*histogram{"one": &h, "merged": &a} {
			got := hh.quantile(q)
			if diff := math.Abs(float64(got-want)) / float64(want); diff > 1.0/histSub {
				t.Errorf("%s: quantile(%v) = %v, want %v (off by %.2f%%)", name, q, got, want, diff*100)
			}
		}
	}
	if h.quantile(1) != 3*time.Second || a.max != 3*time.Second || a.min != 7 {
		t.Errorf("max = %v, merged max %v min %v", h.quantile(1), a.max, a.min)
	}
	if h.n != uint64(len(samples)) || a.n != h.n || a.sum != h.sum {
		t.Errorf("counts: %d, merged %d; sums %v, %v", h.n, a.n, h.sum, a.sum)
	}
	var empty histogram
	if empty.quantile(0.5) != 0 || empty.mean() != 0 {
		t.Error("empty histogram: non-zero quantile or mean")
	}
	var one histogram
	one.record(1234 * time.Microsecond)
	for _, q := range []float64{0.01, 0.5, 0.99, 1} {
		if got := one.quantile(q); got != 1234*time.Microsecond {
			t.Errorf("one sample: quantile(%v) = %v", q, got)
		}
	}
}
