package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Load reads the config file at path and parses it with [Parse].
func Load(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading config: %w", err)
	}
	return Parse(path, data, getenv)
}

// Parse decodes, expands and validates the YAML config in data and returns
// it with defaults applied and Path set to path. path is used only in
// problem reports and may be "".
//
// getenv looks up the variables in ${VAR} references, which are expanded in
// secrets only: upstream header values and sessions.redis.password. A
// variable for which getenv returns "" is treated as unset, which is an
// error. If getenv is nil, [os.Getenv] is used.
//
// Decoding is strict: unknown keys, values of the wrong type and duplicate
// keys are errors. On failure the error is a [Problems] holding every
// problem found, sorted by line. On success, Config.Warnings holds what
// looks wrong but is allowed (see [Config.Warnings]).
func Parse(path string, data []byte, getenv func(string) string) (*Config, error) {
	return parse(path, data, getenv, false)
}

// LoadForCheck is [Load] for gateway validate: a ${VAR} reference to an
// unset variable is a warning, not a problem (and its value is left out),
// so that a config can be checked without its secrets, in CI say. Serving
// a config needs them: use Load.
func LoadForCheck(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading config: %w", err)
	}
	return parse(path, data, getenv, true)
}

func parse(path string, data []byte, getenv func(string) string, unsetWarns bool) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	root, err := parseYAML(path, data)
	if err != nil {
		return nil, err
	}
	d := &decoder{
		file:   path,
		getenv: getenv,
		pos:    make(map[string]position),
		failed: make(map[string]bool),

		unsetWarns: unsetWarns,
	}
	var c Config
	if root != nil {
		d.config(root, &c)
	}
	v := &validator{file: path, pos: d.pos, skip: d.failed, problems: d.problems, warnings: d.warnings}
	v.config(&c)
	if err := v.problems.err(); err != nil {
		return nil, err
	}
	c.Warnings = v.sortedWarnings()
	c.ApplyDefaults()
	c.Path = path
	return &c, nil
}

// yamlLineError matches the "yaml: line N: msg" form of yaml.v3's syntax
// errors.
var yamlLineError = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)

// parseYAML parses data into a node tree and returns the top-level node of
// its only document, or nil for an empty document.
func parseYAML(path string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, Problems{syntaxProblem(path, err)}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, Problems{syntaxProblem(path, err)}
	default:
		return nil, Problems{{File: path, Line: next.Line, Col: next.Column,
			Msg: "the file must hold a single YAML document"}}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// syntaxProblem turns a yaml.v3 parse error into a Problem, moving the line
// number from the message into Line.
func syntaxProblem(path string, err error) Problem {
	p := Problem{File: path}
	msg := err.Error()
	if m := yamlLineError.FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	p.Msg = "invalid YAML: " + msg
	return p
}

// A position is a line and column in the config file.
type position struct{ line, col int }

// A decoder walks the node tree of a config file into a Config. It checks
// the shape of the document (known keys, types, duplicates) and expands
// header values; everything that can also be wrong in a Config built in
// code is left to the validator, which gets the positions recorded in pos.
type decoder struct {
	file     string
	getenv   func(string) string
	problems Problems
	// pos holds the position of every key and list item, by path.
	pos map[string]position
	// failed holds the paths of values that could not be decoded, so that
	// the validator does not report them (or what is inside them) again.
	failed map[string]bool
	// unsetWarns makes an unset variable a warning (LoadForCheck), kept
	// in warnings.
	unsetWarns bool
	warnings   Problems
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.problems = append(d.problems, Problem{
		File: d.file, Line: n.Line, Col: n.Column, Path: path,
		Msg: fmt.Sprintf(format, args...),
	})
}

// fail reports a value that could not be decoded.
func (d *decoder) fail(n *yaml.Node, path, msg string) {
	d.errorf(n, path, "%s", msg)
	d.failed[path] = true
}

func (d *decoder) mark(path string, n *yaml.Node) {
	d.pos[path] = position{n.Line, n.Column}
}

// resolve follows an alias to the node it stands for.
func resolve(n *yaml.Node) *yaml.Node {
	// yaml.v3 rejects an alias before its anchor is complete, so there are
	// no cycles; the bound is only a guard.
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is an explicit or implicit null ("key:",
// "key: ~", "key: null"), which leaves the setting unset.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// An option is a field's cfg tag, its name and, for nonempty and ornone,
// the text after "=".
//
// The decoder follows the types in types.go: each struct is a mapping
// whose keys are its fields' yaml tags, and a field's type says how its
// value is decoded, so a new key is a new field. The cfg tag adds what the
// type cannot say; it holds at most one option, because a text may
// contain commas:
//
//   - positive (int, int64): zero or negative is an error rather than "use
//     the default", since whoever wrote it meant something else. Without
//     it, an integer must not be negative. A Duration is always positive,
//     for the same reason.
//   - secret (string): ${VAR} references are expanded; no problem quotes
//     the value.
//   - nonempty=HINT (string): an explicit "" is an error rather than "use
//     the default"; HINT completes "must not be empty (...)".
//   - ornone=WHAT (list): absent and empty mean different things (nil: no
//     restriction; empty: nothing). An empty list in the file gives a
//     non-nil empty slice, and null is an error, since "key:" with nothing
//     after it (say, every item commented out) would otherwise silently
//     mean "no restriction"; WHAT completes "has no value: ...".
//   - ratio (*float64): a number from 0 to 1; the validator checks the
//     range, for configs built in code too.
//   - headers (map[string]string): upstream headers, see [decoder.headers].
//
// A pointer is left nil for null, so that "unset" and "" (or false, or 0)
// can be told apart. A map other than headers is keyed by names (tool
// names), with paths as [keyPath] gives them.
type option struct{ name, text string }

// A mapping is the keys of a struct in the schema.
type mapping struct {
	// fields maps a key to the index of its struct field and its option.
	fields map[string]schemaField
	// known is the sorted keys, for "unknown key (want one of ...)".
	known string
}

type schemaField struct {
	index int
	opt   option
}

var durationType = reflect.TypeFor[Duration]()

// schema holds the mapping of Config and of every struct inside it. It is
// built when the package is initialized so that a field the decoder cannot
// handle panics in every test (and at start-up) rather than when a file
// first uses its key.
var schema = buildSchema()

func buildSchema() map[reflect.Type]mapping {
	s := make(map[reflect.Type]mapping)
	addType(s, reflect.TypeFor[Config](), option{}, "Config")
	return s
}

// addType checks that the decoder handles type t with option o (where
// names the field, for the panic) and adds the structs in t to s.
func addType(s map[reflect.Type]mapping, t reflect.Type, o option, where string) {
	ok := false
	switch k := t.Kind(); {
	case t == durationType:
		ok = o.name == ""
	case k == reflect.Struct:
		ok = o.name == ""
		if _, done := s[t]; ok && !done {
			addStruct(s, t)
		}
	case k == reflect.String:
		ok = o.name == "" || o.name == "secret" || o.name == "nonempty"
	case k == reflect.Int || k == reflect.Int64:
		ok = o.name == "" || o.name == "positive"
	case k == reflect.Bool:
		ok = o.name == ""
	case k == reflect.Float64:
		ok = o.name == "ratio"
	case k == reflect.Pointer:
		e := t.Elem().Kind()
		ok = e == reflect.String || e == reflect.Bool || e == reflect.Float64 || e == reflect.Int || (e == reflect.Struct || t.Elem() == durationType) && o.name == ""
		addType(s, t.Elem(), o, where)
	case k == reflect.Slice:
		e := t.Elem()
		// list only knows how to say what a null item should be for these.
		ok = (o.name == "" || o.name == "ornone") &&
			(e.Kind() == reflect.String || e.Kind() == reflect.Struct && e != durationType)
		addType(s, e, option{}, where+"[]")
	case k == reflect.Map:
		ok = t.Key().Kind() == reflect.String &&
			(o.name == "" || o.name == "headers" && t == reflect.TypeFor[map[string]string]())
		addType(s, t.Elem(), option{}, where+"[]")
	}
	if !ok {
		panic(fmt.Sprintf("config: %s: the decoder has no case for %s with cfg option %q", where, t, o.name))
	}
}

func addStruct(s map[reflect.Type]mapping, t reflect.Type) {
	m := mapping{fields: make(map[string]schemaField)}
	s[t] = m // before the fields, for a type that contains itself
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		where := t.Name() + "." + f.Name
		if key == "-" {
			continue
		}
		if _, dup := m.fields[key]; dup || key == "" {
			panic("config: " + where + ": yaml key " + strconv.Quote(key) + " is empty or taken (write `yaml:\"-\"` for a field that is not in the file)")
		}
		var o option
		o.name, o.text, _ = strings.Cut(f.Tag.Get("cfg"), "=")
		if (o.name == "nonempty" || o.name == "ornone") != (o.text != "") {
			panic("config: " + where + `: cfg option "` + o.name + `" must have text after "=" exactly when it is nonempty or ornone`)
		}
		addType(s, f.Type, o, where)
		m.fields[key] = schemaField{index: i, opt: o}
	}
	m.known = strings.Join(slices.Sorted(maps.Keys(m.fields)), ", ")
	s[t] = m
}

func (d *decoder) config(n *yaml.Node, c *Config) {
	n = resolve(n)
	if !isNull(n) && n.Kind != yaml.MappingNode {
		d.fail(n, "", "the top level must be a mapping")
		return
	}
	d.fields(n, "", reflect.ValueOf(c).Elem())
}

// value decodes n, the (resolved) value at path, into v, as v's type and
// the field's option o say (see [option]).
func (d *decoder) value(n *yaml.Node, path string, v reflect.Value, o option) {
	switch t := v.Type(); {
	case o.name == "headers":
		d.headers(n, path, v.Addr().Interface().(*map[string]string))
	case o.name == "ornone":
		if isNull(n) {
			d.fail(n, path, "has no value: "+o.text)
			return
		}
		if n.Kind == yaml.SequenceNode && v.IsNil() {
			v.Set(reflect.MakeSlice(t, 0, 0))
		}
		d.list(n, path, v)
	case t == durationType:
		if dur, ok := d.duration(n, path); ok {
			v.SetInt(int64(dur))
		}
	case t.Kind() == reflect.Pointer && t.Elem() == durationType:
		// A duration whose 0 is not "the default", but none: nil for
		// null.
		if isNull(n) {
			return
		}
		if dur, ok := d.durationMin(n, path, true); ok {
			e := reflect.New(durationType)
			e.Elem().SetInt(int64(dur))
			v.Set(e)
		}
	case t.Kind() == reflect.Struct:
		d.fields(n, path, v)
	case t.Kind() == reflect.Slice:
		d.list(n, path, v)
	case t.Kind() == reflect.Map:
		d.names(n, path, v)
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		// A section that may be absent: nil unless the file has it.
		if isNull(n) {
			return
		}
		e := reflect.New(t.Elem())
		d.fields(n, path, e.Elem())
		v.Set(e)
	case t.Kind() == reflect.Pointer:
		e := reflect.New(t.Elem())
		if d.scalarValue(n, path, e.Elem(), o) {
			v.Set(e)
		}
	default:
		d.scalarValue(n, path, v, o)
	}
}

// fields decodes the mapping n into the struct v, each key into the field
// its yaml tag names.
func (d *decoder) fields(n *yaml.Node, path string, v reflect.Value) {
	m := schema[v.Type()]
	d.entries(n, path, func(key string) string { return joinPath(path, key) },
		func(key string, k, val *yaml.Node) {
			p := joinPath(path, key)
			f, ok := m.fields[key]
			if !ok {
				d.errorf(k, p, "unknown key (want one of %s)", m.known)
				return
			}
			d.mark(p, k)
			d.value(resolve(val), p, v.Field(f.index), f.opt)
		})
}

// entries walks the mapping n, reporting a non-mapping, non-string keys and
// duplicate keys, and calls fn for every other entry. keyPath gives the
// path reported for a duplicate key.
func (d *decoder) entries(n *yaml.Node, path string, keyPath func(string) string, fn func(key string, k, v *yaml.Node)) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "must be a mapping")
		return
	}
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "keys must be strings")
			continue
		}
		if k.ShortTag() == "!!merge" {
			d.errorf(k, path, `merge keys ("<<") are not supported`)
			continue
		}
		if first, ok := seen[k.Value]; ok {
			d.errorf(k, keyPath(k.Value), "duplicate key (first defined at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		fn(k.Value, k, v)
	}
}

// items walks the sequence n, calling fn for each item with its path.
func (d *decoder) items(n *yaml.Node, path string, fn func(item *yaml.Node, path string)) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		if n.Kind == yaml.ScalarNode && strings.HasSuffix(path, ".command") {
			d.fail(n, path, `must be a list: the program and its arguments, as in ["npx", "-y", "server"]`)
			return
		}
		d.fail(n, path, "must be a list")
		return
	}
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		item = resolve(item)
		d.mark(p, item)
		fn(item, p)
	}
}

// list decodes the sequence n into the slice v, appending each item.
func (d *decoder) list(n *yaml.Node, path string, v reflect.Value) {
	d.items(n, path, func(item *yaml.Node, p string) {
		e := reflect.New(v.Type().Elem()).Elem()
		if isNull(item) {
			want := "a string"
			if e.Kind() == reflect.Struct {
				want = "a mapping"
			}
			d.fail(item, p, "must be "+want)
		} else {
			d.value(item, p, e, option{})
		}
		// Keep broken items so that indexes in later problems match
		// the file; the validator skips paths reported here.
		v.Set(reflect.Append(v, e))
	})
}

// names decodes the mapping n, whose keys are names (tool names), into the
// map v. A value that fails to decode still gets its entry, zero or
// partly decoded, so that its name is validated.
func (d *decoder) names(n *yaml.Node, path string, v reflect.Value) {
	d.entries(n, path, func(name string) string { return keyPath(path, name) },
		func(name string, k, val *yaml.Node) {
			p := keyPath(path, name)
			d.mark(p, k)
			e := reflect.New(v.Type().Elem()).Elem()
			d.value(resolve(val), p, e, option{})
			if v.IsNil() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			v.SetMapIndex(reflect.ValueOf(name).Convert(v.Type().Key()), e)
		})
}

// scalar reports whether n holds a value to decode: it is false for null
// (the setting stays unset) and, after reporting the problem, for anything
// but a scalar. want completes "must be ...".
func (d *decoder) scalar(n *yaml.Node, path, want string) bool {
	if isNull(n) {
		return false
	}
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "must be "+want)
		return false
	}
	return true
}

// decodeString decodes the scalar n as a string. Like yaml.v3, it accepts
// any scalar ("port: 8080" gives "8080"). It never quotes n's value, so it
// is safe for secrets.
func (d *decoder) decodeString(n *yaml.Node, path string) (string, bool) {
	if !d.scalar(n, path, "a string") {
		return "", false
	}
	var s string
	if err := n.Decode(&s); err != nil {
		d.fail(n, path, "must be a string")
		return "", false
	}
	return s, true
}

// scalarValue decodes the scalar n into v, a string, bool, integer or
// float, and reports whether it did; when it did not, v is unchanged and
// the problem is reported.
func (d *decoder) scalarValue(n *yaml.Node, path string, v reflect.Value, o option) bool {
	switch v.Kind() {
	case reflect.String:
		s, ok := d.str(n, path, o)
		if ok {
			v.SetString(s)
		}
		return ok
	case reflect.Bool:
		b, ok := d.decodeBool(n, path)
		if ok {
			v.SetBool(b)
		}
		return ok
	case reflect.Int, reflect.Int64:
		return d.integer(n, path, v, o.name == "positive")
	case reflect.Float64:
		return d.ratio(n, path, v)
	}
	// addType admits no other kind.
	panic("config: no scalar decoding for " + v.Type().String())
}

// str decodes a string with its option: secret or nonempty.
func (d *decoder) str(n *yaml.Node, path string, o option) (string, bool) {
	switch o.name {
	case "secret":
		return d.expandString(n, path)
	case "nonempty":
		s, ok := d.decodeString(n, path)
		if ok && s == "" {
			d.errorf(n, path, "must not be empty (%s)", o.text)
			return "", false
		}
		return s, ok
	}
	return d.decodeString(n, path)
}

// expandString decodes the scalar n as a string and expands it; see
// [expand]. It reports problems at path and never quotes the value.
func (d *decoder) expandString(n *yaml.Node, path string) (string, bool) {
	raw, ok := d.decodeString(n, path)
	if !ok {
		return "", false
	}
	val, errs := expand(raw, d.getenv)
	if d.unsetWarns && len(errs) > 0 && !slices.ContainsFunc(errs, func(msg string) bool { return !strings.HasPrefix(msg, unsetPrefix) }) {
		for _, msg := range errs {
			d.warnings = append(d.warnings, Problem{File: d.file, Line: n.Line, Col: n.Column, Path: path,
				Msg: msg + " (gateway serve needs it)"})
		}
		d.failed[path] = true
		return "", false
	}
	for _, msg := range errs {
		d.errorf(n, path, "%s", msg)
	}
	if errs != nil {
		return "", false
	}
	return val, true
}

// integer decodes an integer into v, which must be positive if positive
// is set and must not be negative otherwise.
func (d *decoder) integer(n *yaml.Node, path string, v reflect.Value, positive bool) bool {
	if !d.scalar(n, path, "an integer") {
		return false
	}
	p := reflect.New(v.Type())
	// Check the tag first: yaml.v3 would truncate 1.5 to 1.
	if n.ShortTag() != "!!int" || n.Decode(p.Interface()) != nil {
		d.errorf(n, path, "must be an integer, got %q", n.Value)
		return false
	}
	switch i := p.Elem().Int(); {
	case positive && i < 1:
		d.errorf(n, path, "must be positive")
		return false
	case i < 0:
		d.errorf(n, path, "must not be negative")
		return false
	}
	v.Set(p.Elem())
	return true
}

// decodeBool decodes a YAML boolean. Strings such as "true" or "yes" are
// errors: a quoted "false" read as true would be a nasty surprise.
func (d *decoder) decodeBool(n *yaml.Node, path string) (bool, bool) {
	if !d.scalar(n, path, "true or false") {
		return false, false
	}
	var b bool
	if n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		d.fail(n, path, fmt.Sprintf("must be true or false, got %q", n.Value))
		return false, false
	}
	return b, true
}

// duration decodes a positive Go duration string.
func (d *decoder) duration(n *yaml.Node, path string) (Duration, bool) {
	return d.durationMin(n, path, false)
}

// durationMin decodes a duration, which may be 0 if zeroOK.
func (d *decoder) durationMin(n *yaml.Node, path string, zeroOK bool) (Duration, bool) {
	if !d.scalar(n, path, `a duration such as "30s"`) {
		return 0, false
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		d.errorf(n, path, `must be a duration such as "30s" or "1m30s", got %q`, n.Value)
		return 0, false
	}
	if v < 0 || v == 0 && !zeroOK {
		d.errorf(n, path, "must be positive")
		return 0, false
	}
	return Duration(v), true
}

// ratio decodes a number from 0 to 1 into v.
func (d *decoder) ratio(n *yaml.Node, path string, v reflect.Value) bool {
	if !d.scalar(n, path, "a number from 0 to 1") {
		return false
	}
	var f float64
	// Check the tag first: yaml.v3 would decode the string "0.5" too.
	if tag := n.ShortTag(); (tag != "!!float" && tag != "!!int") || n.Decode(&f) != nil {
		d.fail(n, path, fmt.Sprintf("must be a number from 0 to 1, got %q", n.Value))
		return false
	}
	// The validator checks the range, for configs built in code too.
	v.SetFloat(f)
	return true
}

// headers decodes and expands header values. The values are secrets, so
// no problem reported here quotes one.
func (d *decoder) headers(n *yaml.Node, path string, out *map[string]string) {
	keyPath := func(name string) string {
		if !validHeaderName(name) {
			// It may be a secret pasted in the wrong place.
			return path
		}
		return joinPath(path, name)
	}
	d.entries(n, path, keyPath, func(name string, k, v *yaml.Node) {
		// The validator checks the name itself, at this position.
		d.mark(headerKey(path, name), k)
		p := keyPath(name)
		v = resolve(v)
		if isNull(v) {
			// Not p: a key without a value may be a secret pasted
			// without its header name.
			d.errorf(v, path, `a header has no value (write "" for an empty one)`)
			return
		}
		val, ok := d.expandString(v, p)
		if !ok {
			return
		}
		if *out == nil {
			*out = make(map[string]string)
		}
		(*out)[name] = val
	})
}

// headerKey is the key in decoder.pos of the header name in the headers
// mapping at path. It is not a reported path: those leave out invalid
// names.
func headerKey(path, name string) string {
	return path + "\x00" + name
}

// plainKeyRE matches the map keys that keyPath joins with a dot.
var plainKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// keyPath is the path of the entry key in the mapping at path whose keys
// are names (tool names): path.key, or path["key"] when key holds anything
// but letters, digits, "_" and "-" (a tool name may contain dots).
func keyPath(path, key string) string {
	if plainKeyRE.MatchString(key) {
		return joinPath(path, key)
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
