package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"reflect"

	"github.com/mcpgw/gateway/internal/config"
)

// Uses reports whether upstream u of cfg, for any tenant, uses signed
// identity.
func Uses(cfg *config.Config, u *config.Upstream) bool {
	if u.Auth != nil && u.Auth.Mode == config.AuthSignedIdentity {
		return true
	}
	for _, tu := range cfg.TenantCredentials(u.Name) {
		if a := config.EffectiveAuth(u, &tu); a != nil && a.Mode == config.AuthSignedIdentity {
			return true
		}
	}
	return false
}

// A Made is a signer and what it was made from: the config's identity
// settings and public URL, and a digest of its key files' contents.
type Made struct {
	Signer *Signer
	// Config is the config the signer was made for; nil with no signer.
	Config  *config.Config
	KeysSum string
}

// ForConfig returns the signer of cfg: prev's when the identity settings,
// the public URL and the key files' contents are the same, nil when no
// upstream signs. log is the new signer's (nil means no logging).
//
// It fails when the key files cannot be used (config.Validate cannot load
// them): a config that cannot be served is not.
func ForConfig(cfg *config.Config, prev Made, log *slog.Logger) (Made, error) {
	need := false
	for i := range cfg.Upstreams {
		need = need || Uses(cfg, &cfg.Upstreams[i])
	}
	if !need {
		return Made{}, nil
	}
	// Key files rotated in place (the same paths) make a new signer too.
	sum := keyFilesSum(cfg.Identity.SigningKeys)
	if prev.Signer != nil && prev.Config != nil && reflect.DeepEqual(prev.Config.Identity, cfg.Identity) &&
		prev.Config.Server.PublicURL == cfg.Server.PublicURL && prev.KeysSum == sum {
		return Made{Signer: prev.Signer, Config: cfg, KeysSum: sum}, nil
	}
	s, err := NewSigner(Options{
		Issuer: cfg.Server.PublicURL, KeyFiles: cfg.Identity.SigningKeys, TTL: cfg.Identity.TokenTTL.D(), Logger: log,
	})
	if err != nil {
		return Made{}, fmt.Errorf("identity: %w", err)
	}
	return Made{Signer: s, Config: cfg, KeysSum: sum}, nil
}

// keyFilesSum is a digest of the contents of key files ("" for none, or
// for a file that cannot be read: NewSigner reports that).
func keyFilesSum(files []string) string {
	if len(files) == 0 {
		return ""
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return ""
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
