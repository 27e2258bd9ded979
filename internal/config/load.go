package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
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
	}
	var c Config
	if root != nil {
		d.config(root, &c)
	}
	v := &validator{file: path, pos: d.pos, skip: d.failed, problems: d.problems}
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

// field decodes one value of a mapping; v is its value node and path its
// path.
type field func(v *yaml.Node, path string)

// fields decodes the mapping n, calling the field named by each key.
func (d *decoder) fields(n *yaml.Node, path string, fs map[string]field) {
	d.entries(n, path, func(key string) string { return joinPath(path, key) },
		func(key string, k, v *yaml.Node) {
			p := joinPath(path, key)
			f, ok := fs[key]
			if !ok {
				d.errorf(k, p, "unknown key (want one of %s)", strings.Join(slices.Sorted(maps.Keys(fs)), ", "))
				return
			}
			d.mark(p, k)
			f(resolve(v), p)
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

func (d *decoder) str(out *string) field {
	return func(n *yaml.Node, path string) {
		if s, ok := d.decodeString(n, path); ok {
			*out = s
		}
	}
}

// strPtr decodes into a *string, leaving it nil for null so that "unset"
// and "" can be told apart.
func (d *decoder) strPtr(out **string) field {
	return func(n *yaml.Node, path string) {
		if s, ok := d.decodeString(n, path); ok {
			*out = &s
		}
	}
}

func (d *decoder) stringList(out *[]string) field {
	return func(n *yaml.Node, path string) {
		d.items(n, path, func(item *yaml.Node, p string) {
			var s string
			if isNull(item) {
				d.fail(item, p, "must be a string")
			} else {
				s, _ = d.decodeString(item, p)
			}
			// Keep broken items so that indexes in later problems match
			// the file; the validator skips paths reported here.
			*out = append(*out, s)
		})
	}
}

// positive decodes a positive integer. A zero or negative value is an
// error rather than "use the default": whoever wrote it meant something
// else.
func positive[T int | int64](d *decoder, out *T) field {
	return integer(d, out, 1)
}

// integer decodes an integer of at least least (0 or 1).
func integer[T int | int64](d *decoder, out *T, least T) field {
	return func(n *yaml.Node, path string) {
		if !d.scalar(n, path, "an integer") {
			return
		}
		var v T
		// Check the tag first: yaml.v3 would truncate 1.5 to 1.
		if n.ShortTag() != "!!int" || n.Decode(&v) != nil {
			d.errorf(n, path, "must be an integer, got %q", n.Value)
			return
		}
		if v < least {
			if least > 0 {
				d.errorf(n, path, "must be positive")
			} else {
				d.errorf(n, path, "must not be negative")
			}
			return
		}
		*out = v
	}
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

func (d *decoder) boolean(out *bool) field {
	return func(n *yaml.Node, path string) {
		if b, ok := d.decodeBool(n, path); ok {
			*out = b
		}
	}
}

// boolPtr decodes into a *bool, leaving it nil for null.
func (d *decoder) boolPtr(out **bool) field {
	return func(n *yaml.Node, path string) {
		if b, ok := d.decodeBool(n, path); ok {
			*out = &b
		}
	}
}

// nonEmptyStr decodes a string whose explicit "" is an error rather than
// "use the default"; hint completes "must not be empty (...)".
func (d *decoder) nonEmptyStr(out *string, hint string) field {
	return func(n *yaml.Node, path string) {
		s, ok := d.decodeString(n, path)
		if !ok {
			return
		}
		if s == "" {
			d.errorf(n, path, "must not be empty (%s)", hint)
			return
		}
		*out = s
	}
}

// secret decodes a string and expands the ${VAR} references in it. The
// value is a secret: no problem reported here quotes it.
func (d *decoder) secret(out *string) field {
	return func(n *yaml.Node, path string) {
		if s, ok := d.expandString(n, path); ok {
			*out = s
		}
	}
}

// expandString decodes the scalar n as a string and expands it; see
// [expand]. It reports problems at path and never quotes the value.
func (d *decoder) expandString(n *yaml.Node, path string) (string, bool) {
	raw, ok := d.decodeString(n, path)
	if !ok {
		return "", false
	}
	val, errs := expand(raw, d.getenv)
	for _, msg := range errs {
		d.errorf(n, path, "%s", msg)
	}
	if errs != nil {
		return "", false
	}
	return val, true
}

// orNone decodes a list whose absence and emptiness mean different things
// (nil: no restriction; empty: nothing). An empty list in the file gives a
// non-nil empty slice, and null is an error, since "key:" with nothing
// after it (say, every item commented out) would otherwise silently mean
// "no restriction". what completes "has no value: ...".
func orNone[T any](d *decoder, out *[]T, what string, decode field) field {
	return func(n *yaml.Node, path string) {
		if isNull(n) {
			d.fail(n, path, "has no value: "+what)
			return
		}
		if n.Kind == yaml.SequenceNode && *out == nil {
			*out = []T{}
		}
		decode(n, path)
	}
}

// mappings decodes a list of mappings, calling decode for each item.
func mappings[T any](d *decoder, n *yaml.Node, path string, out *[]T, decode func(n *yaml.Node, path string, v *T)) {
	d.items(n, path, func(item *yaml.Node, p string) {
		var v T
		if isNull(item) {
			d.fail(item, p, "must be a mapping")
		} else {
			decode(item, p, &v)
		}
		// Keep broken items so that indexes in later problems match
		// the file; the validator skips paths reported here.
		*out = append(*out, v)
	})
}

// duration decodes a positive Go duration string; see positive for why zero
// is an error.
func (d *decoder) duration(out *Duration) field {
	return func(n *yaml.Node, path string) {
		if !d.scalar(n, path, `a duration such as "30s"`) {
			return
		}
		v, err := time.ParseDuration(n.Value)
		if err != nil {
			d.errorf(n, path, `must be a duration such as "30s" or "1m30s", got %q`, n.Value)
			return
		}
		if v <= 0 {
			d.errorf(n, path, "must be positive")
			return
		}
		*out = Duration(v)
	}
}

func (d *decoder) config(n *yaml.Node, c *Config) {
	n = resolve(n)
	if !isNull(n) && n.Kind != yaml.MappingNode {
		d.fail(n, "", "the top level must be a mapping")
		return
	}
	d.fields(n, "", map[string]field{
		"server":    func(v *yaml.Node, p string) { d.server(v, p, &c.Server) },
		"sessions":  func(v *yaml.Node, p string) { d.sessions(v, p, &c.Sessions) },
		"upstreams": func(v *yaml.Node, p string) { mappings(d, v, p, &c.Upstreams, d.upstream) },
		"auth":      func(v *yaml.Node, p string) { d.auth(v, p, &c.Auth) },
		"tenants":   func(v *yaml.Node, p string) { mappings(d, v, p, &c.Tenants, d.tenant) },
		"limits":    func(v *yaml.Node, p string) { d.limits(v, p, &c.Limits) },
		"telemetry": func(v *yaml.Node, p string) { d.telemetry(v, p, &c.Telemetry) },
	})
}

func (d *decoder) limits(n *yaml.Node, path string, l *Limits) {
	d.fields(n, path, map[string]field{
		"streams_per_principal":      positive(d, &l.StreamsPerPrincipal),
		"streams_per_tenant":         positive(d, &l.StreamsPerTenant),
		"batch_messages":             positive(d, &l.BatchMessages),
		"client_info_bytes":          positive(d, &l.ClientInfoBytes),
		"client_capabilities_bytes":  positive(d, &l.ClientCapabilitiesBytes),
		"parked_calls_per_principal": positive(d, &l.ParkedCallsPerPrincipal),
		"list_pages":                 positive(d, &l.ListPages),
		"list_bytes":                 positive(d, &l.ListBytes),
	})
}

func (d *decoder) server(n *yaml.Node, path string, s *Server) {
	d.fields(n, path, map[string]field{
		"listen":              d.str(&s.Listen),
		"public_url":          d.str(&s.PublicURL),
		"allowed_origins":     d.stringList(&s.AllowedOrigins),
		"admin_listen":        d.str(&s.AdminListen),
		"max_body_bytes":      positive(d, &s.MaxBodyBytes),
		"request_timeout":     d.duration(&s.RequestTimeout),
		"read_header_timeout": d.duration(&s.ReadHeaderTimeout),
		"read_body_timeout":   d.duration(&s.ReadBodyTimeout),
		"list_cache_ttl":      d.duration(&s.ListCacheTTL),
	})
}

func (d *decoder) sessions(n *yaml.Node, path string, s *Sessions) {
	d.fields(n, path, map[string]field{
		"store":             d.str(&s.Store),
		"idle_ttl":          d.duration(&s.IdleTTL),
		"max_sessions":      positive(d, &s.MaxSessions),
		"max_per_principal": positive(d, &s.MaxPerPrincipal),
		"max_per_tenant":    positive(d, &s.MaxPerTenant),
		"mailbox_messages":  positive(d, &s.MailboxMessages),
		"mailbox_bytes":     positive(d, &s.MailboxBytes),
		"redis":             func(v *yaml.Node, p string) { d.redis(v, p, &s.Redis) },
	})
}

func (d *decoder) redis(n *yaml.Node, path string, r *Redis) {
	d.fields(n, path, map[string]field{
		"addrs":       d.stringList(&r.Addrs),
		"master_name": d.str(&r.MasterName),
		"username":    d.str(&r.Username),
		"password":    d.secret(&r.Password),
		"db":          integer(d, &r.DB, 0),
		"tls":         d.boolean(&r.TLS),
		"key_prefix":  d.nonEmptyStr(&r.KeyPrefix, fmt.Sprintf("leave the key out for the default %q", DefaultRedisKeyPrefix)),
		"timeout":     d.duration(&r.Timeout),
	})
}

func (d *decoder) auth(n *yaml.Node, path string, a *Auth) {
	d.fields(n, path, map[string]field{
		"issuers":          func(v *yaml.Node, p string) { mappings(d, v, p, &a.Issuers, d.issuer) },
		"required_scopes":  d.stringList(&a.RequiredScopes),
		"leeway":           d.duration(&a.Leeway),
		"token_cache_size": positive(d, &a.TokenCacheSize),
		"anonymous":        d.boolean(&a.Anonymous),
	})
}

func (d *decoder) issuer(n *yaml.Node, path string, is *Issuer) {
	d.fields(n, path, map[string]field{
		"name":           d.str(&is.Name),
		"issuer_url":     d.str(&is.IssuerURL),
		"audiences":      d.stringList(&is.Audiences),
		"tenant_claim":   d.str(&is.TenantClaim),
		"tenant":         d.str(&is.Tenant),
		"jwks_url":       d.str(&is.JWKSURL),
		"algorithms":     d.stringList(&is.Algorithms),
		"require_at_jwt": d.boolean(&is.RequireATJWT),
	})
}

func (d *decoder) tenant(n *yaml.Node, path string, t *Tenant) {
	d.fields(n, path, map[string]field{
		"id": d.str(&t.ID),
		"upstreams": orNone(d, &t.Upstreams, "leave the key out for every upstream, or write [] for none",
			func(v *yaml.Node, p string) { mappings(d, v, p, &t.Upstreams, d.tenantUpstream) }),
	})
}

func (d *decoder) tenantUpstream(n *yaml.Node, path string, u *TenantUpstream) {
	d.fields(n, path, map[string]field{
		"name":            d.str(&u.Name),
		"tools":           d.rules(&u.Tools),
		"prompts":         d.rules(&u.Prompts),
		"resources":       d.rules(&u.Resources),
		"required_scopes": func(v *yaml.Node, p string) { d.requiredScopes(v, p, &u.RequiredScopes) },
		"annotations":     func(v *yaml.Node, p string) { d.annotations(v, p, &u.Annotations) },
	})
}

func (d *decoder) rules(r *Rules) field {
	return func(n *yaml.Node, path string) {
		d.fields(n, path, map[string]field{
			"allow": orNone(d, &r.Allow, "leave the key out to allow everything, or write [] to allow nothing",
				d.stringList(&r.Allow)),
			"deny": d.stringList(&r.Deny),
		})
	}
}

// requiredScopes decodes a mapping of tool name to a list of scopes.
func (d *decoder) requiredScopes(n *yaml.Node, path string, out *map[string][]string) {
	d.entries(n, path, func(name string) string { return keyPath(path, name) },
		func(name string, k, v *yaml.Node) {
			p := keyPath(path, name)
			d.mark(p, k)
			var scopes []string
			d.stringList(&scopes)(resolve(v), p)
			if *out == nil {
				*out = make(map[string][]string)
			}
			(*out)[name] = scopes
		})
}

// annotations decodes a mapping of tool name to annotations, whose keys
// are MCP's camelCase ones.
func (d *decoder) annotations(n *yaml.Node, path string, out *map[string]ToolAnnotations) {
	d.entries(n, path, func(name string) string { return keyPath(path, name) },
		func(name string, k, v *yaml.Node) {
			p := keyPath(path, name)
			d.mark(p, k)
			var a ToolAnnotations
			d.fields(resolve(v), p, map[string]field{
				"title":           d.strPtr(&a.Title),
				"readOnlyHint":    d.boolPtr(&a.ReadOnlyHint),
				"destructiveHint": d.boolPtr(&a.DestructiveHint),
				"idempotentHint":  d.boolPtr(&a.IdempotentHint),
				"openWorldHint":   d.boolPtr(&a.OpenWorldHint),
			})
			if *out == nil {
				*out = make(map[string]ToolAnnotations)
			}
			(*out)[name] = a
		})
}

func (d *decoder) upstream(n *yaml.Node, path string, u *Upstream) {
	d.fields(n, path, map[string]field{
		"name":            d.str(&u.Name),
		"url":             d.str(&u.URL),
		"prefix":          d.strPtr(&u.Prefix),
		"timeout":         d.duration(&u.Timeout),
		"headers":         func(v *yaml.Node, p string) { d.headers(v, p, &u.Headers) },
		"audit_arguments": d.str(&u.AuditArguments),
		"watch":           d.boolPtr(&u.Watch),
		"lists":           d.str(&u.Lists),
	})
}

func (d *decoder) telemetry(n *yaml.Node, path string, t *Telemetry) {
	d.fields(n, path, map[string]field{
		"tracing": func(v *yaml.Node, p string) {
			d.fields(v, p, map[string]field{
				"enabled":      d.boolean(&t.Tracing.Enabled),
				"endpoint":     d.str(&t.Tracing.Endpoint),
				"sample_ratio": d.ratio(&t.Tracing.SampleRatio),
			})
		},
		"audit": func(v *yaml.Node, p string) {
			d.fields(v, p, map[string]field{
				"output": d.nonEmptyStr(&t.Audit.Output, fmt.Sprintf("leave the key out for %q, or write %q", DefaultAuditOutput, AuditOff)),
			})
		},
		"pprof": d.boolean(&t.Pprof),
	})
}

// ratio decodes a number from 0 to 1 into a *float64, leaving it nil for
// null so that an explicit 0 (sample nothing) is not taken for "unset".
func (d *decoder) ratio(out **float64) field {
	return func(n *yaml.Node, path string) {
		if !d.scalar(n, path, "a number from 0 to 1") {
			return
		}
		var v float64
		// Check the tag first: yaml.v3 would decode the string "0.5" too.
		if tag := n.ShortTag(); (tag != "!!float" && tag != "!!int") || n.Decode(&v) != nil {
			d.fail(n, path, fmt.Sprintf("must be a number from 0 to 1, got %q", n.Value))
			return
		}
		// The validator checks the range, for configs built in code too.
		*out = &v
	}
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
