package testkit

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A Browser is an HTTP client as a person's browser is to a server: it
// keeps cookies and follows redirects. Its pages are read with regular
// expressions, fit for the simple forms of the gateway and the [IDP] only.
type Browser struct {
	Client *http.Client
	// Header is sent with every request (say, Sec-Fetch-Site).
	Header http.Header
}

// NewBrowser returns a browser with no cookies.
func NewBrowser(t testing.TB) *Browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &Browser{Client: &http.Client{Jar: jar, Transport: tr, Timeout: 20 * time.Second}}
}

// A Page is what a browser got: the last URL after redirects, its status
// and body.
type Page struct {
	URL    *url.URL
	Status int
	Header http.Header
	Body   string
}

// Get fetches u.
func (b *Browser) Get(t testing.TB, u string) *Page {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b.Do(t, req)
}

// Do sends req with the browser's headers and cookies.
func (b *Browser) Do(t testing.TB, req *http.Request) *Page {
	t.Helper()
	for k, v := range b.Header {
		req.Header[k] = v
	}
	resp, err := b.Client.Do(req)
	if err != nil {
		t.Fatalf("testkit: browser %s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("testkit: browser %s %s: %v", req.Method, req.URL, err)
	}
	return &Page{URL: resp.Request.URL, Status: resp.StatusCode, Header: resp.Header, Body: string(body)}
}

var (
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)">(.*?)</form>`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
)

// Form returns the action (resolved against the page's URL) and hidden
// fields of the page's first POST form whose action contains action.
func (p *Page) Form(t testing.TB, action string) (string, url.Values) {
	t.Helper()
	for _, m := range formRE.FindAllStringSubmatch(p.Body, -1) {
		act := html.UnescapeString(m[1])
		if !strings.Contains(act, action) {
			continue
		}
		fields := url.Values{}
		for _, h := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			fields.Set(html.UnescapeString(h[1]), html.UnescapeString(h[2]))
		}
		to, err := p.URL.Parse(act)
		if err != nil {
			t.Fatal(err)
		}
		return to.String(), fields
	}
	t.Fatalf("testkit: no form with action %q at %s (%d):\n%s", action, p.URL, p.Status, p.Body)
	return "", nil
}

// Submit posts the page's form whose action contains action, with its
// hidden fields and the given ones.
func (b *Browser) Submit(t testing.TB, p *Page, action string, fields url.Values) *Page {
	t.Helper()
	to, form := p.Form(t, action)
	for k, v := range fields {
		form[k] = v
	}
	return b.Post(t, to, form)
}

// Post posts form to u.
func (b *Browser) Post(t testing.TB, u string, form url.Values) *Page {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.Do(t, req)
}

// SignIn drives the IdP's forms from page, one of its pages: it signs in
// as login and allows what is asked, as many times as the IdP asks (a
// client may send the browser on to another authorization at the IdP). It
// returns the first page that is not the IdP's (the last client's
// callback), or the IdP's last redirect if the browser stops following.
func (p *IDP) SignIn(t testing.TB, b *Browser, page *Page, login string) *Page {
	t.Helper()
	if !strings.HasPrefix(page.URL.String(), p.Issuer) {
		t.Fatalf("testkit: SignIn from %s, not a page of the IdP at %s (%d):\n%s", page.URL, p.Issuer, page.Status, page.Body)
	}
	for range 8 {
		switch {
		case !strings.HasPrefix(page.URL.String(), p.Issuer) || page.Status != http.StatusOK:
			return page
		case strings.Contains(page.Body, "/login\""):
			page = b.Submit(t, page, "/login", url.Values{"login": {login}})
		case strings.Contains(page.Body, "/confirm\""):
			page = b.Submit(t, page, "/confirm", nil)
		default:
			return page
		}
	}
	t.Fatalf("testkit: SignIn: the IdP kept asking:\n%s", page.Body)
	return nil
}
