package auth

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpgw/gateway/internal/config"
)

func TestDevIssuer(t *testing.T) {
	d, err := NewDevIssuer()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	d.Logger = slog.New(slog.NewTextHandler(logs, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if !strings.Contains(logs.String(), "DEVELOPMENT TOKEN ISSUER") || !strings.Contains(logs.String(), "gateway demo") {
		t.Errorf("no loud warning in the log: %s", logs)
	}

	withJWKS := d.Issuer("dev")
	withDiscovery := withJWKS
	withDiscovery.JWKSURL = ""
	for name, is := range map[string]config.Issuer{"jwks_url": withJWKS, "discovery": withDiscovery} {
		t.Run(name, func(t *testing.T) {
			cfg := &config.Config{
				Server: config.Server{PublicURL: testPublicURL},
				Auth:   config.Auth{Issuers: []config.Issuer{is}},
			}
			v, err := NewVerifier(cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := d.Token("bob", "acme", testPublicURL, []string{"a", "b"}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			p, err := v.Verify(t.Context(), tok)
			if err != nil {
				t.Fatal(err)
			}
			want := &Principal{Issuer: d.URL, Subject: "bob", ClientID: "gateway-demo", Tenant: "acme", Scopes: []string{"a", "b"}}
			if p.Claims["sub"] != "bob" {
				t.Errorf("claims not kept: %v", p.Claims)
			}
			if diff := cmp.Diff(want, p, cmpopts.IgnoreFields(Principal{}, "Claims")); diff != "" {
				t.Errorf("principal mismatch (-want +got):\n%s", diff)
			}
			if err := v.Ready(t.Context()); err != nil {
				t.Errorf("Ready: %v", err)
			}
			other, _ := d.Token("bob", "acme", "https://elsewhere.example.com", nil, time.Minute)
			_, err = v.Verify(t.Context(), other)
			wantReason(t, err, ErrInvalidToken, ReasonWrongAudience)
		})
	}
}
