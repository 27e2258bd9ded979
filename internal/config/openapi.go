package config

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mcpgw/gateway/internal/openapi"
)

// documentTimeout bounds the fetch of an openapi upstream's document.
const documentTimeout = 30 * time.Second

// upstreamOpenAPI checks an openapi upstream: its document is read and
// compiled, so that a document that cannot be served (it does not parse,
// two operations take one tool name) fails the config, and not the first
// call.
func (v *validator) upstreamOpenAPI(path string, u *Upstream) {
	for _, k := range []struct {
		key string
		set bool
	}{{"url", u.URL != ""}, {"command", len(u.Command) > 0}, {"env", u.Env != nil}, {"working_dir", u.WorkingDir != ""}, {"stdio", u.Stdio != nil}} {
		if k.set {
			v.addf(path+"."+k.key, "does not apply to an openapi upstream (its requests go to openapi.base_url or the document's servers)")
		}
	}
	if u.Watch != nil && *u.Watch {
		v.addf(path+".watch", "does not apply to an openapi upstream: its tools change with its document, at a reload")
	}
	o := u.OpenAPI
	path += ".openapi"
	if o == nil {
		v.addf(path, "is required for an openapi upstream: the API's document")
		return
	}
	if o.BaseURL != "" {
		v.httpURL(path+".base_url", o.BaseURL)
	}
	nonNegative(v, path+".max_document_bytes", o.MaxDocumentBytes)
	emptySelector := false
	for _, list := range []struct {
		key string
		sel []string
	}{{"include", o.Include}, {"exclude", o.Exclude}} {
		for i, s := range list.sel {
			if strings.TrimSpace(s) == "" {
				v.addf(fmt.Sprintf("%s.%s[%d]", path, list.key, i), "must not be empty")
				emptySelector = true
			}
		}
	}
	if o.Document == "" {
		v.addf(path+".document", "is required: a file path or an http(s) URL")
		return
	}
	if v.skipped(path) || emptySelector {
		return
	}
	src, err := o.read(u.TLS)
	if err != nil {
		v.addf(path+".document", "%v", err)
		return
	}
	api, err := openapi.Compile(src, o.Options(u.Name))
	if err != nil {
		v.addf(path+".document", "%v", err)
		return
	}
	for _, w := range api.Warnings() {
		v.warnf(path+".document", "%s", w)
	}
	o.source = src
}

// Options returns what the openapi package needs of o, for the upstream
// named name.
func (o *UpstreamOpenAPI) Options(name string) openapi.Options {
	return openapi.Options{Name: name, DocumentURL: o.Document, BaseURL: o.BaseURL, Include: o.Include, Exclude: o.Exclude}
}

// read returns the document: a file's contents, or what its URL answers
// with t's TLS settings, at most MaxDocumentBytes either way.
func (o *UpstreamOpenAPI) read(t *UpstreamTLS) ([]byte, error) {
	limit := cmp.Or(o.MaxDocumentBytes, DefaultMaxDocumentBytes)
	var r io.Reader
	if u, err := url.Parse(o.Document); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		if u.User != nil {
			return nil, errors.New("must not contain credentials (user:password@)")
		}
		hc, err := t.HTTPClient()
		if err != nil {
			return nil, fmt.Errorf("cannot be fetched: %v", err)
		}
		defer hc.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), documentTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.Document, nil)
		if err != nil {
			return nil, fmt.Errorf("cannot be fetched: %v", err)
		}
		req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
		resp, err := hc.Do(req)
		if err != nil {
			// The error names the URL, which is the config's own.
			return nil, fmt.Errorf("cannot be fetched: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("cannot be fetched: HTTP %d", resp.StatusCode)
		}
		r = resp.Body
	} else {
		f, err := os.Open(o.Document)
		if err != nil {
			return nil, fmt.Errorf("cannot be read: %v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("is larger than %d bytes (openapi.max_document_bytes)", limit)
	}
	return b, nil
}
