package auth

import (
	"errors"
)

// Sentinels for errors.Is. Every error [Verifier.Verify] returns matches
// exactly one of them.
var (
	// ErrInvalidToken means the token is not acceptable: the caller must
	// get a new one (HTTP 401, RFC 6750 §3.1 invalid_token).
	ErrInvalidToken = errors.New("invalid token")
	// ErrIssuerUnavailable means the token could not be checked because its
	// issuer's discovery document or signing keys could not be fetched. It
	// says nothing about the token (HTTP 503).
	ErrIssuerUnavailable = errors.New("token issuer unavailable")
)

// Reasons are the values [Reason] returns. They are a closed, small set so
// that they can be metric labels; the error text carries the details.
const (
	ReasonMalformed            = "malformed"             // not a compact JWS, bad JSON, claims of the wrong type
	ReasonUnsupportedAlgorithm = "unsupported algorithm" // alg none, HS*, or outside the issuer's allowlist
	ReasonUnknownIssuer        = "unknown issuer"        // iss is not a configured issuer_url
	ReasonUnknownKey           = "unknown key"           // kid not in the issuer's key set, even after a refresh
	ReasonBadSignature         = "bad signature"         // no key of the issuer verifies the signature
	ReasonExpired              = "expired"               // exp (plus leeway) has passed
	ReasonNotYetValid          = "not yet valid"         // nbf or iat (minus leeway) is in the future
	ReasonWrongAudience        = "wrong audience"        // aud holds none of the issuer's audiences
	ReasonMissingClaim         = "missing claim"         // no sub or no exp
	ReasonMissingTenant        = "missing tenant"        // tenant claim absent, empty or not a string
	ReasonIssuerUnavailable    = "issuer unavailable"    // [ErrIssuerUnavailable]
	ReasonWrongTokenType       = "wrong token type"      // typ is not at+jwt where the issuer says require_at_jwt

	// Reasons of the middleware, for [MiddlewareOptions.OnFailure].
	ReasonMissingToken      = "missing token"       // no Authorization header, or not Bearer
	ReasonMalformedHeader   = "malformed header"    // Bearer with no token, two tokens, bad characters
	ReasonTokenNotInHeader  = "token not in header" // access_token in the query, or a form body
	ReasonUnknownTenant     = "unknown tenant"      // [MiddlewareOptions.KnownTenant] said no
	ReasonInsufficientScope = "insufficient scope"  // a required scope is missing
	ReasonInternal          = "internal"            // anything else
)

// tokenError is an error of [Verifier.Verify]: a sentinel, a reason from the
// list above and, optionally, the underlying error.
type tokenError struct {
	sentinel error
	reason   string
	err      error
}

func (e *tokenError) Error() string {
	s := e.sentinel.Error()
	if e.sentinel != ErrIssuerUnavailable {
		s += ": " + e.reason
	}
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *tokenError) Unwrap() []error {
	if e.err == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.err}
}

// invalid returns an [ErrInvalidToken] with the given reason. err, if not
// nil, is detail for logs; it must not contain the token.
func invalid(reason string, err error) error {
	return &tokenError{sentinel: ErrInvalidToken, reason: reason, err: err}
}

// unavailable returns an [ErrIssuerUnavailable] wrapping err.
func unavailable(err error) error {
	return &tokenError{sentinel: ErrIssuerUnavailable, reason: ReasonIssuerUnavailable, err: err}
}

// Reason returns the short, low-cardinality reason of an error returned by
// [Verifier.Verify]: one of the Reason constants. It returns "" for nil and
// [ReasonInternal] for errors of other origin.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	var te *tokenError
	if errors.As(err, &te) {
		return te.reason
	}
	if errors.Is(err, ErrIssuerUnavailable) {
		return ReasonIssuerUnavailable
	}
	if errors.Is(err, ErrInvalidToken) {
		return ReasonMalformed
	}
	return ReasonInternal
}
