package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpgw/gateway/internal/vault"
)

// Revoke deletes k's token, after revoking it at the authorization
// server that granted it (RFC 7009) where that server has a revocation
// endpoint; a revocation that fails does not keep the token. It reports
// whether there was a token.
func (b *Broker) Revoke(ctx context.Context, k vault.Key) (bool, error) {
	st := b.cur.Load()
	if st.vault == nil {
		return false, errors.New("the vault has no keys")
	}
	t, err := st.vault.Token(ctx, k)
	if err != nil {
		return false, err
	}
	if t != nil {
		if err := b.revokeAt(ctx, st, k, t); err != nil {
			b.log.Info("user_oauth: revocation at the authorization server failed; the token is deleted all the same", "upstream", k.Upstream, "error", err)
		}
	}
	return st.vault.Delete(ctx, k)
}

// revokeAt revokes t's refresh token (which, RFC 7009 §2.1, should end the
// grant) and its access token.
func (b *Broker) revokeAt(ctx context.Context, st *brokerState, k vault.Key, t *vault.Token) error {
	u, a := st.auth(k.Upstream, k.Tenant)
	if a == nil || t.Issuer == "" {
		return errors.New("the upstream is no longer configured with user_oauth")
	}
	c := b.forIssuer(b.conn(ctx, st, u, a), t.Issuer)
	meta, err := b.metadata(ctx, c, t.Issuer)
	if err != nil {
		return err
	}
	if meta.RevocationEndpoint == "" {
		return nil
	}
	var errs []error
	for _, tok := range []struct{ value, hint string }{{t.RefreshToken, "refresh_token"}, {t.AccessToken, "access_token"}} {
		if tok.value == "" {
			continue
		}
		form := url.Values{"token": {tok.value}, "token_type_hint": {tok.hint}}
		if a.ClientSecret == "" {
			form.Set("client_id", a.ClientID)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, meta.RevocationEndpoint, strings.NewReader(form.Encode()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if a.ClientSecret != "" {
			req.SetBasicAuth(url.QueryEscape(a.ClientID), url.QueryEscape(a.ClientSecret))
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			errs = append(errs, err)
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errs = append(errs, fmt.Errorf("revocation refused (HTTP %d)", resp.StatusCode))
		}
	}
	return errors.Join(errs...)
}

// TokensHandler serves a user's own links at TokensPath: GET lists the
// upstreams the principal has a token for (no values), DELETE
// TokensPath/<upstream> unlinks one (see Revoke). principal returns the
// request's verified caller; the handler must sit behind authentication.
func (b *Broker) TokensHandler(principal func(*http.Request) (vault.Principal, bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := principal(r)
		st := b.cur.Load()
		if !ok || st.vault == nil {
			http.NotFound(w, r)
			return
		}
		name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, TokensPath), "/")
		switch {
		case r.Method == http.MethodGet && name == "":
			infos, err := st.vault.List(r.Context(), vault.Filter{Tenant: p.Tenant, Subject: p.Subject})
			if err != nil {
				http.Error(w, "the token vault is unavailable", http.StatusServiceUnavailable)
				return
			}
			type link struct {
				Upstream string `json:"upstream"`
				Expiry   string `json:"expiry,omitempty"`
				Refresh  bool   `json:"refresh"`
			}
			out := []link{}
			for _, in := range infos {
				if in.Issuer != p.Issuer {
					continue
				}
				l := link{Upstream: in.Upstream, Refresh: in.Refresh}
				if !in.Expiry.IsZero() {
					l.Expiry = in.Expiry.UTC().Format("2006-01-02T15:04:05Z")
				}
				out = append(out, l)
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_ = json.NewEncoder(w).Encode(map[string]any{"links": out})
		case r.Method == http.MethodDelete && name != "" && !strings.Contains(name, "/"):
			found, err := b.Revoke(r.Context(), vault.Key{Principal: p, Upstream: name})
			switch {
			case err != nil:
				http.Error(w, "the token vault is unavailable", http.StatusServiceUnavailable)
			case !found:
				http.NotFound(w, r)
			default:
				w.WriteHeader(http.StatusNoContent)
			}
		default:
			w.Header().Set("Allow", "GET, DELETE")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}
