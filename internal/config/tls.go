package config

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// Load reads t's files and returns the TLS client config they make:
// RootCAs from CAFile (nil, the system roots, when it is empty), the
// client certificate of CertFile and KeyFile, ServerName, and TLS 1.2 at
// least. Both config validation and the upstream client call it, so a
// config that validated builds its client from the same checks. Errors
// name the key and the file's path, never the file's contents.
func (t *UpstreamTLS) Load() (*tls.Config, error) {
	tc, _, err := t.load()
	return tc, err
}

// HTTPClient returns an HTTP client with t's TLS settings (nil t: the
// system's) that follows no redirect: what the gateway asks (a policy
// decision point, a guard's hook) answers itself, and never sends the
// request, and the credentials it carries, elsewhere.
func (t *UpstreamTLS) HTTPClient() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if t != nil {
		tc, err := t.Load()
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// Fingerprint returns the SHA-256, in hex, of the contents of t's files as
// validation ([Parse], [Load], [Config.Validate]) last read them, or ""
// when t was not validated. It is kept in t, so two Upstreams whose files
// have the same paths but were rotated in between are not
// reflect.DeepEqual: a reload then builds a new client with the new files.
// Validation writes it in place, so a config made by copying another must
// not share the other's *UpstreamTLS when it is validated.
func (t *UpstreamTLS) Fingerprint() string { return t.fingerprint }

// A tlsFileError is a problem with the file of one key of an UpstreamTLS.
type tlsFileError struct {
	key string // "ca_file", "cert_file" or "key_file"
	err error
}

func (e *tlsFileError) Error() string { return "tls." + e.key + ": " + e.err.Error() }
func (e *tlsFileError) Unwrap() error { return e.err }

// load is Load, also returning the fingerprint of the files it read. Its
// error joins a *tlsFileError for each key whose file is wrong.
func (t *UpstreamTLS) load() (*tls.Config, string, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	sum := sha256.New()
	var errs []error
	fail := func(key string, err error) { errs = append(errs, &tlsFileError{key, err}) }
	read := func(key, path string) []byte {
		b, err := readPEMFile(path)
		if err != nil {
			fail(key, err)
			return nil
		}
		// Each file's own hash, after its key, so that the bytes of one
		// cannot pass for those of another.
		h := sha256.Sum256(b)
		sum.Write([]byte(key))
		sum.Write(h[:])
		return b
	}
	if t.CAFile != "" {
		if b := read("ca_file", t.CAFile); b != nil {
			pool, err := parseCAs(b)
			if err != nil {
				fail("ca_file", fmt.Errorf("%s: %w", t.CAFile, err))
			}
			tc.RootCAs = pool
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		certPEM, keyPEM := read("cert_file", t.CertFile), read("key_file", t.KeyFile)
		if certPEM == nil || keyPEM == nil {
			break
		}
		if _, err := parseCerts(certPEM); err != nil {
			fail("cert_file", fmt.Errorf("%s: %w", t.CertFile, err))
			break
		}
		// The certificate parses, so what X509KeyPair finds wrong is the
		// key, or that the two do not match. Its messages quote neither.
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			fail("key_file", fmt.Errorf("%s: %w", t.KeyFile, err))
			break
		}
		tc.Certificates = []tls.Certificate{pair}
	case t.CertFile != "":
		fail("key_file", errors.New("is required with cert_file"))
	case t.KeyFile != "":
		fail("cert_file", errors.New("is required with key_file"))
	}
	if errs != nil {
		return nil, "", errors.Join(errs...)
	}
	return tc, hex.EncodeToString(sum.Sum(nil)), nil
}

// maxPEMFile bounds a TLS file: a large CA bundle is a few hundred KiB.
const maxPEMFile = 4 << 20

// readPEMFile reads the file at path, up to maxPEMFile bytes. Its errors
// name the path (a *PathError) and never quote the contents.
func readPEMFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	switch {
	case err != nil:
		return nil, err
	case len(b) > maxPEMFile:
		return nil, fmt.Errorf("%s: larger than %d MiB", path, maxPEMFile>>20)
	}
	return b, nil
}

// parseCAs returns a pool of the certificates in the PEM bundle b, which
// must hold at least one and nothing else.
func parseCAs(b []byte) (*x509.CertPool, error) {
	certs, err := parseCerts(b)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// parseCerts parses the PEM certificates in b: at least one, and no other
// block (a private key in a file that should be public is a mistake worth
// stopping for). Its errors quote nothing of b.
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		switch {
		case block.Type == "CERTIFICATE":
		case strings.Contains(block.Type, "PRIVATE KEY"):
			return nil, errors.New("holds a private key: want only CERTIFICATE blocks")
		default:
			return nil, errors.New("holds a PEM block that is not a CERTIFICATE")
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse", len(certs)+1)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("holds no PEM certificate")
	}
	return certs, nil
}

// hostnameRE matches the DNS names server_name accepts.
var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?$`)

// upstreamTLS checks the tls section of an upstream at path: on an https
// URL only, with files that load. On success it records their
// fingerprint in t.
func (v *validator) upstreamTLS(path, rawURL string, t *UpstreamTLS) {
	if t == nil {
		return
	}
	if u, err := url.Parse(rawURL); err == nil && u.Scheme == "http" {
		v.addf(path, "is set but the upstream's url is http: TLS needs https")
	}
	if s := t.ServerName; s != "" && !hostnameRE.MatchString(s) && net.ParseIP(s) == nil {
		v.addf(path+".server_name", "%q is not a host name or IP address", s)
	}
	if v.skipped(path) {
		return
	}
	_, fp, err := t.load()
	if err == nil {
		t.fingerprint = fp
		return
	}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		fe := e.(*tlsFileError)
		v.addf(path+"."+fe.key, "%v", fe.err)
	}
}
