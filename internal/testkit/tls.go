package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A CA is a certificate authority for tests: an ECDSA P-256 key and a
// self-signed certificate valid for an hour either side of its creation.
type CA struct {
	Cert *x509.Certificate
	// PEM is Cert, PEM-encoded: what an upstream's tls.ca_file holds.
	PEM []byte
	key *ecdsa.PrivateKey
}

// A Leaf is a certificate a CA issued and its key, PEM-encoded: what an
// upstream's tls.cert_file and tls.key_file hold.
type Leaf struct {
	CertPEM, KeyPEM []byte
}

// TLS returns l as a tls.Certificate.
func (l Leaf) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return c
}

// serial numbers the certificates of a test run.
var serial atomic.Int64

// NewCA returns a new CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool returns a pool holding ca's certificate alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue returns a certificate of ca named by names (DNS names, or IP
// addresses such as "127.0.0.1"), for servers and clients alike, with a
// new key.
func (ca *CA) Issue(t testing.TB, names ...string) Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if len(names) > 0 {
		tmpl.Subject.CommonName = names[0]
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// StartMTLS starts srv, made with httptest.NewUnstartedServer, over TLS
// with a certificate of ca for 127.0.0.1 and localhost. If clients is not
// nil, the server requires a client certificate issued by it
// (tls.RequireAndVerifyClientCert). The server's connections are dropped
// and the server closed when the test ends.
func StartMTLS(t testing.TB, srv *httptest.Server, ca, clients *CA) {
	t.Helper()
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, "127.0.0.1", "localhost").TLS(t)},
		MinVersion:   tls.VersionTLS12,
	}
	// Refused handshakes are what the tests are about; the server need not
	// log them.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if clients != nil {
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		srv.TLS.ClientCAs = clients.Pool()
	}
	srv.StartTLS()
	t.Cleanup(func() {
		// Close would wait for the streams a client left open.
		srv.CloseClientConnections()
		srv.Close()
	})
}
