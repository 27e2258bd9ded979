package config

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/gateway/internal/testkit"
)

// testPKI writes, in dir, a CA (ca.pem), a client certificate signed by
// it (cert.pem, key.pem) and another key (other-key.pem).
func testPKI(t *testing.T, dir string) {
	t.Helper()
	ca := testkit.NewCA(t, "test CA")
	leaf, other := ca.Issue(t, "gateway"), ca.Issue(t, "other")
	for name, b := range map[string][]byte{
		"ca.pem": ca.PEM, "cert.pem": leaf.CertPEM, "key.pem": leaf.KeyPEM, "other-key.pem": other.KeyPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func tlsYAML(url, tls string) string {
	return "upstreams:\n  - name: up\n    url: " + url + "\n    tls:\n" + tls + anon
}

func TestParseUpstreamTLS(t *testing.T) {
	dir := t.TempDir()
	testPKI(t, dir)
	yaml := tlsYAML("https://up.internal/mcp", "      ca_file: "+dir+"/ca.pem\n      cert_file: "+dir+"/cert.pem\n      key_file: "+dir+"/key.pem\n      server_name: mcp.internal\n")
	c, err := Parse("test.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Upstreams[0].TLS
	want := &UpstreamTLS{CAFile: dir + "/ca.pem", CertFile: dir + "/cert.pem", KeyFile: dir + "/key.pem", ServerName: "mcp.internal"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(UpstreamTLS{}), cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".fingerprint"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if len(got.Fingerprint()) != 64 {
		t.Errorf("Fingerprint() = %q, want a hex SHA-256", got.Fingerprint())
	}
	tc, err := got.Load()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "mcp.internal" || tc.MinVersion != tls.VersionTLS12 || tc.InsecureSkipVerify {
		t.Errorf("Load() = RootCAs %v, %d certificates, ServerName %q, MinVersion %#x, InsecureSkipVerify %t",
			tc.RootCAs != nil, len(tc.Certificates), tc.ServerName, tc.MinVersion, tc.InsecureSkipVerify)
	}

	// Only a CA: the client presents no certificate.
	c, err = Parse("test.yaml", []byte(tlsYAML("https://up/mcp", "      ca_file: "+dir+"/ca.pem\n")), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if tc, err := c.Upstreams[0].TLS.Load(); err != nil || tc.RootCAs == nil || tc.Certificates != nil {
		t.Errorf("Load() of a CA only = %+v, %v", tc, err)
	}
}

// TestUpstreamTLSFingerprint checks that rotated files under the same
// paths make the parsed Upstreams differ, as the dispatcher's reload
// compares them, and that unchanged files do not.
func TestUpstreamTLSFingerprint(t *testing.T) {
	dir := t.TempDir()
	testPKI(t, dir)
	yaml := []byte(tlsYAML("https://up/mcp", "      ca_file: "+dir+"/ca.pem\n      cert_file: "+dir+"/cert.pem\n      key_file: "+dir+"/key.pem\n"))
	parse := func() Upstream {
		t.Helper()
		c, err := Parse("test.yaml", yaml, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		return c.Upstreams[0]
	}
	a, b := parse(), parse()
	if !reflect.DeepEqual(a, b) {
		t.Error("two parses of the same files differ")
	}
	testPKI(t, dir) // new CA, certificate and key under the same paths
	c := parse()
	if reflect.DeepEqual(a, c) || a.TLS.Fingerprint() == c.TLS.Fingerprint() {
		t.Error("the upstream is the same after its files were rotated")
	}
	// A config built in code gets its fingerprint from Validate.
	cfg := &Config{Auth: Auth{Anonymous: true}, Upstreams: []Upstream{{Name: "up", URL: "https://up/mcp",
		TLS: &UpstreamTLS{CAFile: dir + "/ca.pem", CertFile: dir + "/cert.pem", KeyFile: dir + "/key.pem"}}}}
	if cfg.Upstreams[0].TLS.Fingerprint() != "" {
		t.Error("fingerprint before Validate")
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Upstreams[0].TLS.Fingerprint(); got != c.TLS.Fingerprint() {
		t.Errorf("Validate's fingerprint %q, Parse's %q", got, c.TLS.Fingerprint())
	}
}

func TestParseUpstreamTLSProblems(t *testing.T) {
	dir := t.TempDir()
	testPKI(t, dir)
	// secret stands for contents that must never be quoted.
	const secret = "s3cr3t-c0ntents"
	for name, text := range map[string]string{
		"garbage.pem": "not PEM at all " + secret + "\n",
		"broken.pem":  "-----BEGIN CERTIFICATE-----\n" + "c2VjcmV0LWNvbnRlbnRz" + "\n-----END CERTIFICATE-----\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const https = "https://up/mcp"
	tests := []struct {
		name, url, tls string
		want           []string
	}{
		{
			name: "missing CA file",
			url:  https, tls: "      ca_file: DIR/nope.pem\n",
			want: []string{"test.yaml:5: upstreams[0].tls.ca_file: open DIR/nope.pem: no such file or directory"},
		},
		{
			name: "CA file not PEM",
			url:  https, tls: "      ca_file: DIR/garbage.pem\n",
			want: []string{"test.yaml:5: upstreams[0].tls.ca_file: DIR/garbage.pem: holds no PEM certificate"},
		},
		{
			name: "CA certificate does not parse",
			url:  https, tls: "      ca_file: DIR/broken.pem\n",
			want: []string{"test.yaml:5: upstreams[0].tls.ca_file: DIR/broken.pem: certificate 1 does not parse"},
		},
		{
			name: "private key as CA file",
			url:  https, tls: "      ca_file: DIR/key.pem\n",
			want: []string{"test.yaml:5: upstreams[0].tls.ca_file: DIR/key.pem: holds a private key: want only CERTIFICATE blocks"},
		},
		{
			name: "cert without key",
			url:  https, tls: "      cert_file: DIR/cert.pem\n",
			want: []string{"test.yaml:4: upstreams[0].tls.key_file: is required with cert_file"},
		},
		{
			name: "key without cert",
			url:  https, tls: "      key_file: DIR/key.pem\n",
			want: []string{"test.yaml:4: upstreams[0].tls.cert_file: is required with key_file"},
		},
		{
			name: "cert file not PEM",
			url:  https, tls: "      cert_file: DIR/garbage.pem\n      key_file: DIR/key.pem\n",
			want: []string{"test.yaml:5: upstreams[0].tls.cert_file: DIR/garbage.pem: holds no PEM certificate"},
		},
		{
			name: "key file not PEM",
			url:  https, tls: "      cert_file: DIR/cert.pem\n      key_file: DIR/garbage.pem\n",
			want: []string{"test.yaml:6: upstreams[0].tls.key_file: DIR/garbage.pem: tls: failed to find any PEM data in key input"},
		},
		{
			name: "key does not match",
			url:  https, tls: "      cert_file: DIR/cert.pem\n      key_file: DIR/other-key.pem\n",
			want: []string{"test.yaml:6: upstreams[0].tls.key_file: DIR/other-key.pem: tls: private key does not match public key"},
		},
		{
			name: "tls on http",
			url:  "http://up/mcp", tls: "      ca_file: DIR/ca.pem\n",
			want: []string{"test.yaml:4: upstreams[0].tls: is set but the upstream's url is http: TLS needs https"},
		},
		{
			name: "every problem at once",
			url:  "http://up/mcp", tls: "      ca_file: DIR/nope.pem\n      cert_file: DIR/cert.pem\n      server_name: https://x/\n",
			want: []string{
				"test.yaml:4: upstreams[0].tls: is set but the upstream's url is http: TLS needs https",
				"test.yaml:4: upstreams[0].tls.key_file: is required with cert_file",
				"test.yaml:5: upstreams[0].tls.ca_file: open DIR/nope.pem: no such file or directory",
				`test.yaml:7: upstreams[0].tls.server_name: "https://x/" is not a host name or IP address`,
			},
		},
		{
			name: "insecure_skip_verify is not a key",
			url:  https, tls: "      insecure_skip_verify: true\n",
			want: []string{"test.yaml:5: upstreams[0].tls.insecure_skip_verify: unknown key (want one of ca_file, cert_file, key_file, server_name)"},
		},
		{
			name: "not a mapping",
			url:  https, tls: "      - DIR/ca.pem\n",
			want: []string{"test.yaml:5: upstreams[0].tls: must be a mapping"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := tlsYAML(tt.url, strings.ReplaceAll(tt.tls, "DIR", dir))
			_, err := Parse("test.yaml", []byte(yaml), env(nil))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "c2VjcmV0") {
				t.Errorf("the error quotes a file's contents: %v", err)
			}
			got := problemLines(t, err)
			for i := range got {
				got[i] = strings.ReplaceAll(got[i], dir, "DIR")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
