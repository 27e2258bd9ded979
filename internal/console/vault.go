package console

import (
	"cmp"
	"context"
	"net/http"
	"time"
)

// The vault page, and its one action: unlinking a user from an upstream,
// when admin.console.vault_unlink is on. Off, the page shows counts only
// and the console refuses an unlink.

// VaultUsersMax bounds the users the vault page lists per upstream; the
// page says how many more there are.
const VaultUsersMax = 200

const (
	// unlinkTimeout bounds an unlink: the revocation at the user's
	// authorization server, then the vault's delete.
	unlinkTimeout = 15 * time.Second
	// maxUnlinkForm bounds an unlink's form, and maxUnlinkField each of
	// its fields.
	maxUnlinkForm  = 16 << 10
	maxUnlinkField = 1024
)

// A VaultUser is one user's link to an upstream, as the vault names it:
// the user's issuer, tenant and subject. Never its token.
type VaultUser struct {
	Upstream                string
	Issuer, Tenant, Subject string
}

// vaultData is what the vault page renders.
type vaultData struct {
	Vault
	// Unlink: admin.console.vault_unlink is on, and the page lists each
	// upstream's users with an Unlink button.
	Unlink bool
	// Result is what the last unlink did: one fixed line, "" for none.
	Result string
}

// unlinkResults are the lines the vault page shows after an unlink, by
// the value of its "unlinked" parameter: fixed texts, so that a link from
// elsewhere cannot make the page say anything else.
var unlinkResults = map[string]string{
	"done":  "Unlinked: the user's token was revoked at its authorization server where that server allows it, and deleted from the vault.",
	"none":  "Nothing was unlinked: the vault held no token for that user and upstream.",
	"error": "The unlink failed: the vault could not be reached. See the gateway's log.",
}

func (h *handler) vault(w http.ResponseWriter, r *http.Request) {
	d := vaultData{Vault: h.src.Vault(r.Context()), Unlink: h.access().VaultUnlink, Result: unlinkResults[r.URL.Query().Get("unlinked")]}
	for i := range d.Upstreams {
		u := &d.Upstreams[i]
		switch {
		case !d.Unlink:
			u.Linked, u.More = nil, 0
		case len(u.Linked) > VaultUsersMax:
			u.More += len(u.Linked) - VaultUsersMax
			u.Linked = u.Linked[:VaultUsersMax]
		}
	}
	h.render(w, r, http.StatusOK, "vault", page{Title: "Vault", Nav: "vault", Data: d})
}

// unlink revokes and deletes the token of the user the form names, for
// the upstream it names, then sends the reader back to the vault page.
func (h *handler) unlink(w http.ResponseWriter, r *http.Request) {
	if !h.access().VaultUnlink {
		http.Error(w, "unlinking is off: admin.console.vault_unlink is not set", http.StatusForbidden)
		return
	}
	// ServeHTTP refuses every cross-origin post; an unlink is the one that
	// changes something, so it checks again.
	if !sameOrigin(r) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxUnlinkForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the unlink form could not be read", http.StatusBadRequest)
		return
	}
	u := VaultUser{Upstream: r.PostForm.Get("upstream"), Issuer: r.PostForm.Get("issuer"), Tenant: r.PostForm.Get("tenant"), Subject: r.PostForm.Get("subject")}
	if u.Upstream == "" || u.Tenant == "" || u.Subject == "" ||
		max(len(u.Upstream), len(u.Issuer), len(u.Tenant), len(u.Subject)) > maxUnlinkField {
		http.Error(w, "an unlink names an upstream, a tenant and a subject", http.StatusBadRequest)
		return
	}
	operator := cmp.Or(User(r.Context()), "console")
	// Not cancelled with the request: a reader who leaves must not cut an
	// unlink between the revocation and the delete.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), unlinkTimeout)
	defer cancel()
	found, err := h.src.Unlink(ctx, operator, u)
	result := "done"
	switch {
	case err != nil:
		h.log.Warn("console: an unlink failed", "upstream", u.Upstream, "tenant", u.Tenant, "operator", operator, "error", err.Error())
		result = "error"
	case !found:
		result = "none"
	default:
		h.log.Info("console: unlinked a user", "upstream", u.Upstream, "tenant", u.Tenant, "subject", u.Subject, "operator", operator)
	}
	http.Redirect(w, r, Path+"/vault?unlinked="+result, http.StatusSeeOther)
}
