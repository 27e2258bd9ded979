package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// PrincipalRecord returns the record s keeps, under prefix, for the
// session-less requests of principal p that share key (the gateway keys
// them by principal and by the capabilities they declared), creating it,
// of protocol version, on first use. Its id derives from key alone, so
// every replica finds the same one. It fails when the record found
// belongs to another principal.
func PrincipalRecord(ctx context.Context, s Store, prefix, key string, p Principal, version string) (*Record, error) {
	sum := sha256.Sum256([]byte(key))
	id := prefix + hex.EncodeToString(sum[:16])
	rec, err := s.Get(ctx, id)
	if err == nil {
		if rec.Principal != p {
			return nil, errors.New("stateless record bound to another principal")
		}
		return rec, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	now := time.Now()
	rec = &Record{ID: id, ProtocolVersion: version, Created: now, LastSeen: now, Principal: p}
	switch err := s.Create(ctx, rec); {
	case err == nil:
		return rec, nil
	case errors.Is(err, ErrExists):
		return s.Get(ctx, id) // another replica, or request, made it
	default:
		return nil, err
	}
}
