package credentials_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/credentials"
)

const hunter = "hunter2-very-secret"

func TestSecretValue(t *testing.T) {
	if got := credentials.NewSecret(hunter).Value(); got != hunter {
		t.Errorf("Value = %q", got)
	}
	if got := credentials.NewSecret("").String(); got != "" {
		t.Errorf("empty secret prints %q, want \"\"", got)
	}
	if got := credentials.NewSecret(hunter).String(); got == "" {
		t.Error("a set secret prints as unset")
	}
}

func TestSecretFmt(t *testing.T) {
	s := credentials.NewSecret(hunter)
	c := caller("https://idp", "alice", "t1", hunter, "s")
	for _, tc := range []struct {
		format string
		arg    any
	}{
		{"%v", s}, {"%+v", s}, {"%#v", s}, {"%s", s}, {"%q", s}, {"%x", s}, {"%X", s}, {"%10s", s},
		{"%v", &s}, {"%+v", &s}, {"%#v", &s}, {"%s", &s},
		{"%v", c}, {"%+v", c}, {"%#v", c}, {"%s", c},
		{"%v", *c}, {"%+v", *c}, {"%#v", *c},
		{"%v", []credentials.Secret{s}}, {"%v", map[string]credentials.Secret{"k": s}},
		{"%v", struct{ Token credentials.Secret }{s}},
	} {
		out := fmt.Sprintf(tc.format, tc.arg)
		if strings.Contains(out, hunter) || strings.Contains(out, fmt.Sprintf("%x", hunter)) || strings.Contains(out, fmt.Sprintf("%X", hunter)) {
			t.Errorf("Sprintf(%q, %T) = %q shows the secret", tc.format, tc.arg, out)
		}
	}
	if got := fmt.Sprint(s); got != "REDACTED" {
		t.Errorf("Sprint = %q, want REDACTED (it is set)", got)
	}
}

func TestSecretSlog(t *testing.T) {
	s := credentials.NewSecret(hunter)
	c := caller("https://idp", "alice", "t1", hunter, "s")
	for _, tc := range []struct {
		name string
		h    func(*bytes.Buffer) slog.Handler
	}{
		{"json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
		{"text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			log := slog.New(tc.h(&b))
			log.Info("msg", "secret", s, slog.Any("ptr", &s), slog.Any("caller", c), slog.Any("callerv", *c),
				slog.Group("g", "secret", s), "list", []credentials.Secret{s})
			log.With("secret", s).Info("with")
			out := b.String()
			if strings.Contains(out, hunter) {
				t.Errorf("log shows the secret:\n%s", out)
			}
			if !strings.Contains(out, "REDACTED") {
				t.Errorf("log does not say the secret is set:\n%s", out)
			}
		})
	}
}

func TestSecretJSON(t *testing.T) {
	s := credentials.NewSecret(hunter)
	c := caller("https://idp", "alice", "t1", hunter, "s")
	for _, v := range []any{s, &s, c, *c, []credentials.Secret{s}, map[string]any{"k": s}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%T): %v", v, err)
		}
		if bytes.Contains(b, []byte(hunter)) {
			t.Errorf("Marshal(%T) = %s shows the secret", v, b)
		}
		if !json.Valid(b) {
			t.Errorf("Marshal(%T) = %s, not JSON", v, b)
		}
	}
	b, _ := json.Marshal(credentials.NewSecret(""))
	if string(b) != `""` {
		t.Errorf("empty secret: %s", b)
	}
	b, _ = json.Marshal(c)
	if !bytes.Contains(b, []byte(`"Token":"REDACTED"`)) {
		t.Errorf("caller: %s", b)
	}
}
