package config

import (
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// redacted replaces header values wherever an Upstream is printed.
const redacted = "REDACTED"

// String describes u for humans with its header values redacted. fmt uses
// it for %v and %s, including when u is inside a Config.
func (u Upstream) String() string {
	prefix := "<name>"
	if u.Prefix != nil {
		prefix = fmt.Sprintf("%q", *u.Prefix)
	}
	var hs []string
	for _, name := range slices.Sorted(maps.Keys(u.Headers)) {
		hs = append(hs, name+": "+redacted)
	}
	return fmt.Sprintf("{name: %s, url: %s, prefix: %s, timeout: %s, headers: {%s}}",
		u.Name, redactURL(u.URL), prefix, u.Timeout, strings.Join(hs, ", "))
}

// GoString is like String; it keeps %#v from printing header values.
func (u Upstream) GoString() string { return "config.Upstream" + u.String() }

// LogValue logs u's name, URL, prefix, timeout and header names, never its
// header values.
func (u Upstream) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", u.Name),
		slog.String("url", redactURL(u.URL)),
		slog.String("prefix", u.EffectivePrefix()),
		slog.Duration("timeout", u.Timeout.D()),
		slog.Any("header_names", slices.Sorted(maps.Keys(u.Headers))),
	)
}

// redactURL hides the user info of a URL built in code (a parsed config
// never has any): a bare user name may be a token, as in
// https://TOKEN@host/.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<invalid URL>"
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	return u.String()
}
