package credentials_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
)

// recordingSource is a Source that says mode and records the callers it
// is asked about.
type recordingSource struct {
	mode string
	seen []*credentials.Caller
}

func (s *recordingSource) Mode(c *credentials.Caller) string {
	s.seen = append(s.seen, c)
	return s.mode
}

func (s *recordingSource) Partition(c *credentials.Caller) string {
	s.seen = append(s.seen, c)
	return "u:" + c.Tenant + "/" + c.Subject
}
func (s *recordingSource) NeedsCaller(*credentials.Caller) bool     { return true }
func (s *recordingSource) Apply(context.Context, http.Header) error { return nil }
func (s *recordingSource) Invalidate(context.Context) bool          { return false }
func (s *recordingSource) Close()                                   {}

// last returns the caller last asked about.
func (s *recordingSource) last() *credentials.Caller { return s.seen[len(s.seen)-1] }

// TestNewCaller: the principal's fields and its token, which prints as
// REDACTED; no token, no secret.
func TestNewCaller(t *testing.T) {
	c := credentials.NewCaller("https://idp.example", "alice", "acme", []string{"a", "b"}, "tok-123")
	if c.Issuer != "https://idp.example" || c.Subject != "alice" || c.Tenant != "acme" || !slices.Equal(c.Scopes, []string{"a", "b"}) {
		t.Errorf("caller %+v", c)
	}
	if c.Token.Value() != "tok-123" || c.Token.String() != "REDACTED" {
		t.Errorf("token %q (%s)", c.Token.Value(), c.Token)
	}
	if c := credentials.NewCaller("i", "s", "t", nil, ""); c.Token.Value() != "" || c.Token.String() != "" {
		t.Errorf("token of a caller without one: %q", c.Token.String())
	}
}

// TestCarry: the caller travels in the context only when some upstream's
// credentials are per request; otherwise it is not even made.
func TestCarry(t *testing.T) {
	alice := credentials.NewCaller("i", "alice", "acme", nil, "tok")
	made := 0
	who := func() *credentials.Caller { made++; return alice }

	ctx := credentials.Carry(context.Background(), false, who)
	if made != 0 {
		t.Error("caller made without per-request credentials")
	}
	if c := credentials.From(ctx); c.Subject != "" || credentials.TenantOf(ctx) != "" {
		t.Errorf("without per-request credentials the context carries %+v", c)
	}

	ctx = credentials.Carry(context.Background(), true, who)
	if made != 1 || credentials.From(ctx) != alice {
		t.Errorf("with per-request credentials: made %d, carries %+v", made, credentials.From(ctx))
	}
	if got := credentials.TenantOf(ctx); got != "acme" {
		t.Errorf("TenantOf = %q", got)
	}
}

// TestPartitionOf: no per-request credentials, no partition; with them,
// the request's caller decides, or, before it is made, the principal's
// issuer, subject and tenant.
func TestPartitionOf(t *testing.T) {
	if got := credentials.PartitionOf(nil, nil, "i", "alice", "acme"); got != "" {
		t.Errorf("static headers alone: partition %q", got)
	}

	src := &recordingSource{mode: credentials.ModeSignedIdentity}
	if got := credentials.PartitionOf(src, nil, "i", "alice", "acme"); got != "u:acme/alice" {
		t.Errorf("before the caller is made: partition %q", got)
	}
	if c := src.last(); c.Issuer != "i" || c.Token.Value() != "" || c.Scopes != nil {
		t.Errorf("asked about %+v: want the principal's fields alone", c)
	}

	alice := credentials.NewCaller("i", "alice", "acme", []string{"s"}, "tok")
	if got := credentials.PartitionOf(src, alice, "i", "alice", "acme"); got != "u:acme/alice" || src.last() != alice {
		t.Errorf("with the caller made: partition %q, asked about %+v", got, src.last())
	}

	// A real per-user mode: each principal its own partition, the same
	// whether or not the caller was made.
	cfg := config1(upstream(&config.UpstreamAuth{Mode: config.AuthTokenExchange, TokenURL: "https://as.example/token", ClientID: gwClient, ClientSecret: gwSecret}))
	x := source(t, cfg, credentials.Options{})
	pa := credentials.PartitionOf(x, nil, "i", "alice", "acme")
	pb := credentials.PartitionOf(x, nil, "i", "bob", "acme")
	if pa == "" || pa == pb {
		t.Errorf("token exchange partitions: alice %q, bob %q", pa, pb)
	}
	if got := credentials.PartitionOf(x, alice, "i", "alice", "acme"); got != pa {
		t.Errorf("alice's partition %q once her caller is made, %q before", got, pa)
	}
}

// TestAuditMode: the mode an audit record names, "" for static headers
// and when the request had no per-request caller.
func TestAuditMode(t *testing.T) {
	alice := credentials.NewCaller("i", "alice", "acme", nil, "tok")
	for _, tc := range []struct {
		name string
		src  credentials.Source
		who  *credentials.Caller
		want string
	}{
		{"no per-request credentials", nil, alice, ""},
		{"no caller", &recordingSource{mode: credentials.ModeTokenExchange}, nil, ""},
		{"static", &recordingSource{mode: credentials.ModeStatic}, alice, ""},
		{"token exchange", &recordingSource{mode: credentials.ModeTokenExchange}, alice, credentials.ModeTokenExchange},
		{"signed identity", &recordingSource{mode: credentials.ModeSignedIdentity}, alice, credentials.ModeSignedIdentity},
	} {
		if got := credentials.AuditMode(tc.src, tc.who); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
