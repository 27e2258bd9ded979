package config

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSchemaHintsQuoteDefaults keeps the hints written in cfg tags in step
// with the constants they name: a tag cannot refer to a constant.
func TestSchemaHintsQuoteDefaults(t *testing.T) {
	for _, tc := range []struct {
		typ   reflect.Type
		field string
		want  []string
	}{
		{reflect.TypeFor[Redis](), "KeyPrefix", []string{DefaultRedisKeyPrefix}},
		{reflect.TypeFor[Audit](), "Output", []string{DefaultAuditOutput, AuditOff}},
	} {
		f, _ := tc.typ.FieldByName(tc.field)
		tag := f.Tag.Get("cfg")
		for _, w := range tc.want {
			if !strings.Contains(tag, strconv.Quote(w)) {
				t.Errorf("%s.%s: cfg tag %q does not quote %q", tc.typ.Name(), tc.field, tag, w)
			}
		}
	}
}

// TestSchemaRejectsWhatItCannotDecode checks that a field the decoder has
// no case for panics when the schema is built (at package init for
// Config), not when a file first uses its key.
func TestSchemaRejectsWhatItCannotDecode(t *testing.T) {
	for name, typ := range map[string]reflect.Type{
		"no yaml tag": reflect.TypeFor[struct{ A string }](),
		"duplicate key": reflect.TypeFor[struct {
			A string `yaml:"a"`
			B string `yaml:"a"`
		}](),
		"unknown option": reflect.TypeFor[struct {
			A int `yaml:"a" cfg:"postive"`
		}](),
		"option on the wrong type": reflect.TypeFor[struct {
			A bool `yaml:"a" cfg:"positive"`
		}](),
		"positive duration": reflect.TypeFor[struct {
			A Duration `yaml:"a" cfg:"positive"`
		}](),
		"nonempty without a hint": reflect.TypeFor[struct {
			A string `yaml:"a" cfg:"nonempty"`
		}](),
		"text on an option without one": reflect.TypeFor[struct {
			A string `yaml:"a" cfg:"secret=x"`
		}](),
		"float that is not a ratio": reflect.TypeFor[struct {
			A *float64 `yaml:"a"`
		}](),
		"list of lists": reflect.TypeFor[struct {
			A [][]string `yaml:"a"`
		}](),
		"headers of another type": reflect.TypeFor[struct {
			A map[string][]string `yaml:"a" cfg:"headers"`
		}](),
		"unsupported kind": reflect.TypeFor[struct {
			A uint `yaml:"a"`
		}](),
		"nested": reflect.TypeFor[struct {
			A []struct {
				B complex64 `yaml:"b"`
			} `yaml:"a"`
		}](),
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("addType accepted %s", typ)
				}
			}()
			addType(make(map[reflect.Type]mapping), typ, option{}, "T")
		})
	}
}

// newKeys is a struct of every kind of field, as a new section would add
// them: one field each, with nothing else to write.
type newKeys struct {
	Name    string            `yaml:"name"`
	Token   string            `yaml:"token" cfg:"secret"`
	Mode    string            `yaml:"mode" cfg:"nonempty=leave the key out for the default"`
	Label   *string           `yaml:"label"`
	Count   int               `yaml:"count" cfg:"positive"`
	Offset  int64             `yaml:"offset"`
	On      bool              `yaml:"on"`
	Maybe   *bool             `yaml:"maybe"`
	Wait    Duration          `yaml:"wait"`
	Share   *float64          `yaml:"share" cfg:"ratio"`
	Only    []string          `yaml:"only" cfg:"ornone=leave the key out for all"`
	Items   []Rules           `yaml:"items"`
	ByName  map[string]Rules  `yaml:"by_name"`
	Headers map[string]string `yaml:"headers" cfg:"headers"`
	Skipped string            `yaml:"-"`
}

// TestSchemaNewKeys decodes a struct that is not part of Config, to show
// that a new key needs only its field: the decoder, the unknown-key list
// and the paths all follow from the tags.
func TestSchemaNewKeys(t *testing.T) {
	s := make(map[reflect.Type]mapping)
	addType(s, reflect.TypeFor[newKeys](), option{}, "newKeys")
	saved := schema
	schema = s
	defer func() { schema = saved }()

	decode := func(t *testing.T, src string) (newKeys, []string) {
		t.Helper()
		root, err := parseYAML("t.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		d := &decoder{file: "t.yaml", getenv: env(map[string]string{"TOKEN": "s3cret"}),
			pos: make(map[string]position), failed: make(map[string]bool)}
		var v newKeys
		d.fields(root, "", reflect.ValueOf(&v).Elem())
		d.problems.sort()
		var msgs []string
		for _, p := range d.problems {
			msgs = append(msgs, p.Error())
		}
		return v, msgs
	}

	got, problems := decode(t, `
name: n
token: ${TOKEN}
mode: m
label: ""
count: 3
offset: 0
on: true
maybe: false
wait: 1m
share: 0.5
only: []
items: [{allow: [a]}]
by_name: {x.y: {deny: [b]}}
headers: {X-A: "1"}
`)
	if problems != nil {
		t.Fatalf("problems: %q", problems)
	}
	want := newKeys{
		Name: "n", Token: "s3cret", Mode: "m", Label: ptr(""), Count: 3, On: true,
		Maybe: ptr(false), Wait: Duration(60e9), Share: ptr(0.5), Only: []string{},
		Items:   []Rules{{Allow: []string{"a"}}},
		ByName:  map[string]Rules{"x.y": {Deny: []string{"b"}}},
		Headers: map[string]string{"X-A": "1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}

	_, problems = decode(t, `
mode: ""
count: 0
offset: -1
on: "yes"
wait: 0s
only:
items: [~]
by_name: {x.y: {allow: 1}}
skipped: x
`)
	wantProblems := []string{
		`t.yaml:2: mode: must not be empty (leave the key out for the default)`,
		`t.yaml:3: count: must be positive`,
		`t.yaml:4: offset: must not be negative`,
		`t.yaml:5: on: must be true or false, got "yes"`,
		`t.yaml:6: wait: must be positive`,
		`t.yaml:7: only: has no value: leave the key out for all`,
		`t.yaml:8: items[0]: must be a mapping`,
		`t.yaml:9: by_name["x.y"].allow: must be a list`,
		`t.yaml:10: skipped: unknown key (want one of by_name, count, headers, items, label, maybe, mode, name, offset, on, only, share, token, wait)`,
	}
	if diff := cmp.Diff(wantProblems, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
