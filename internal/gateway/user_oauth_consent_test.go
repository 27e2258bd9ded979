package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestUserOAuthConsentNamesIssuer: the consent page names the principal
// the link was made for by subject, tenant and issuer: the issuer of the
// principal's gateway token, not the upstream's authorization server.
func TestUserOAuthConsentNamesIssuer(t *testing.T) {
	e := startOAuthEnv(t, 0, nil)
	alice, _ := e.connect(t, "alice", false)
	page := testkit.NewBrowser(t).Get(t, linkFromResult(t, alice))
	if page.Status != http.StatusOK {
		t.Fatalf("consent page: %d %s", page.Status, page.Body)
	}
	for _, want := range []string{`<strong id="subject">alice</strong>`, `<strong id="tenant">acme</strong>`, `<strong id="issuer">` + e.idp.Issuer + `</strong>`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the consent page lacks %s:\n%s", want, page.Body)
		}
	}
}
