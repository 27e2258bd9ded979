package credentials

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

func TestClassOf(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want addrClass
	}{
		{"127.0.0.1", classLoopback}, {"127.9.9.9", classLoopback}, {"::1", classLoopback}, {"::ffff:127.0.0.1", classLoopback},
		{"10.1.2.3", classPrivate}, {"172.16.0.1", classPrivate}, {"192.168.1.1", classPrivate}, {"fd00::1", classPrivate},
		{"100.64.0.1", classPrivate}, {"64:ff9b::a00:1", classPrivate},
		{"169.254.169.254", classLinkLocal}, {"fe80::1", classLinkLocal}, {"64:ff9b::a9fe:a9fe", classLinkLocal},
		{"0.0.0.0", classSpecial}, {"0.1.2.3", classSpecial}, {"::", classSpecial}, {"224.0.0.1", classSpecial},
		{"93.184.215.14", 0}, {"2606:4700::1", 0},
	} {
		if got := classOf(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("classOf(%s) = %b, want %b", tc.addr, got, tc.want)
		}
	}
}

// TestGuardedDial: the guarded client's check is made on the address
// dialed, whatever name led there: a loopback server is not reached
// unless loopback is allowed.
func TestGuardedDial(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	b := &Broker{hc: &http.Client{}}
	for _, u := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
		_, err := b.guarded(classPrivate | classLinkLocal).Do(req)
		if !errors.Is(err, errAddress) {
			t.Errorf("GET %s: %v, want %v", u, err, errAddress)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached the loopback server", n)
	}
	resp, err := b.guarded(classLoopback).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Fatal("loopback allowed, the server was not reached")
	}
}

func TestRefuseIssuer(t *testing.T) {
	open := asConn{discovered: true, upstream: "http://up.example:8080/mcp"}
	listed := open
	listed.listed = map[string]bool{"https://as.example/t1": true, "http://idp.internal": true}
	for _, tc := range []struct {
		c      asConn
		issuer string
		want   string // "" accepted
	}{
		{open, "https://as.example", ""},
		{open, "https://as.example/tenant1", ""},
		{open, "http://up.example:8080/as", ""},
		{open, "http://as.example", "not https"},
		{open, "http://up.example:8081", "not https"},
		{open, "https://as.example/?x=1", "query or fragment"},
		{open, "https://as.example/#f", "query or fragment"},
		{open, "https://as.example/?", "query or fragment"},
		{open, "https://user@as.example", "not an issuer identifier"},
		{open, "/relative", "not an issuer identifier"},
		{listed, "https://as.example/t1/", ""},
		{listed, "http://idp.internal", ""},
		{listed, "https://as.example", "not one of vault.discovered_issuers"},
		{asConn{}, "http://anything?x", ""}, // configured: the administrator's choice
	} {
		err := tc.c.refuse(tc.issuer)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("refuse(%q) = %v, want %q", tc.issuer, err, tc.want)
		}
	}
	for _, tc := range []struct {
		issuer, endpoint string
		ok               bool
	}{
		{"https://as.example", "https://login.as.example/authorize", true},
		{"https://as.example", "https://as.example/token?tenant=1", true},
		{"https://as.example", "http://as.example/token", false},
		{"http://up.example:8080/as", "http://up.example:8080/as/token", true},
		{"http://up.example:8080/as", "http://127.0.0.1/token", false},
		{"https://as.example", "https://as.example/token#f", false},
		{"https://as.example", "javascript:alert(1)", false},
	} {
		if got := open.endpoint(tc.issuer, tc.endpoint); got != tc.ok {
			t.Errorf("endpoint(%q, %q) = %v", tc.issuer, tc.endpoint, got)
		}
	}
}
