package protocol

import (
	"encoding/base64"
	"errors"
	"strings"
)

// EncodeHeaderValue returns v as a header value: as it is when it is plain
// ASCII that can travel in a header, else in the Base64 sentinel form
// (2026-07-28 basic/transports/streamable-http, "Value Encoding"), which
// values that merely look like that form take too.
func EncodeHeaderValue(v string) string {
	plain := v != "" && v[0] != ' ' && v[0] != '\t' && v[len(v)-1] != ' ' && v[len(v)-1] != '\t'
	for i := 0; plain && i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c > 0x7e {
			plain = false
		}
	}
	if plain && !(strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=")) {
		return v
	}
	if v == "" {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

// NameKey is the params member Mcp-Name mirrors for a method, or "" (see
// Methods).
func NameKey(method string) string {
	m, _ := Method(method)
	return m.NameKey
}

// DecodeHeaderValue undoes the Base64 sentinel encoding of a mirrored header
// value (2026-07-28 basic/transports/streamable-http, "Value Encoding").
func DecodeHeaderValue(v string) (string, error) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return "", errors.New("invalid characters")
		}
	}
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, nil
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, nil
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", errors.New("bad Base64")
	}
	return string(b), nil
}
