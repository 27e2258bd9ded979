package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestSecretsNeverEncoded: every field tagged cfg:"secret", anywhere in
// a Config, is redacted when the config is encoded as JSON (a debug dump,
// a log line): set them all, encode, and none may show.
func TestSecretsNeverEncoded(t *testing.T) {
	const marker = "secret-marker-7c1f0e"
	var cfg Config
	var n int
	var fill func(v reflect.Value, depth int)
	fill = func(v reflect.Value, depth int) {
		if depth > 8 {
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			if v.Type().Elem().Kind() == reflect.Struct {
				if v.IsNil() {
					v.Set(reflect.New(v.Type().Elem()))
				}
				fill(v.Elem(), depth+1)
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Struct && v.Len() == 0 {
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
				fill(v.Index(0), depth+1)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if !f.IsExported() {
					continue
				}
				if f.Tag.Get("cfg") == "secret" && f.Type.Kind() == reflect.String {
					v.Field(i).SetString(marker)
					n++
					continue
				}
				fill(v.Field(i), depth+1)
			}
		}
	}
	fill(reflect.ValueOf(&cfg).Elem(), 0)
	if n < 5 {
		t.Fatalf("only %d secret fields found", n)
	}
	b, err := json.Marshal(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(string(b), marker); i >= 0 {
		t.Errorf("a secret is encoded: ...%s...", b[max(0, i-120):i])
	}
}
