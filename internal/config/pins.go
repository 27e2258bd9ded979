package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Pins names the pins file: the tool and prompt definitions the admin
// accepted, by upstream (written by `gateway pin`, meant for version
// control). Upstreams with a pin policy have their listed definitions
// checked against it.
type Pins struct {
	// File is the pins file's path. Empty: no pins; no upstream may then
	// have a pin policy.
	File string `yaml:"file"`
}

// UpstreamPin is an upstream's pin policy.
type UpstreamPin struct {
	// OnChange says what happens to a tool or prompt whose definition
	// differs from its pin: "quarantine" (hidden and uncallable for
	// every tenant until the pins file accepts it), "warn" (the default:
	// logged and audited, still served) or "allow" (served; only counted
	// by explain).
	OnChange string `yaml:"on_change"`
	// New says what happens to a tool or prompt the pins file does not
	// have: "allow" (the default) or "quarantine".
	New string `yaml:"new"`

	// pinned are this upstream's pins, as validation read them from the
	// pins file. A field, so that reflect.DeepEqual of two Upstreams
	// tells a changed pins file apart (a reload then lists again).
	pinned *UpstreamPins `yaml:"-"`
}

// Values of upstreams[].pin.on_change and .new.
const (
	PinQuarantine = "quarantine"
	PinWarn       = "warn"
	PinAllow      = "allow"
)

// Pinned returns the upstream's pins as the pins file had them at
// validation; never nil.
func (p *UpstreamPin) Pinned() *UpstreamPins {
	if p.pinned == nil {
		return &UpstreamPins{}
	}
	return p.pinned
}

// SetPinned sets the pins, for a config built in code.
func (p *UpstreamPin) SetPinned(u *UpstreamPins) { p.pinned = u }

// PinsFile is the pins file.
type PinsFile struct {
	Version   int                      `yaml:"version"`
	Upstreams map[string]*UpstreamPins `yaml:"upstreams"`
}

// UpstreamPins are one upstream's pinned tools and prompts, by original
// name.
type UpstreamPins struct {
	Tools   map[string]PinnedItem `yaml:"tools,omitempty"`
	Prompts map[string]PinnedItem `yaml:"prompts,omitempty"`
}

// PinnedItem is one pinned definition: the SHA-256 of the canonical JSON
// of what the model reads of it, and of each such field, which tell what
// changed without keeping the definition itself.
type PinnedItem struct {
	SHA256 string            `yaml:"sha256"`
	Fields map[string]string `yaml:"fields,omitempty"`
}

// PinsVersion is the version of the pins file format.
const PinsVersion = 1

// maxPinsBytes bounds the pins file read.
const maxPinsBytes = 16 << 20

// ReadPins reads a pins file.
func ReadPins(path string) (*PinsFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) > maxPinsBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxPinsBytes)
	}
	var f PinsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Version != PinsVersion {
		return nil, fmt.Errorf("%s: version %d, want %d", path, f.Version, PinsVersion)
	}
	for name, up := range f.Upstreams {
		if up == nil {
			return nil, fmt.Errorf("%s: upstream %q: empty", path, name)
		}
		for _, m := range []map[string]PinnedItem{up.Tools, up.Prompts} {
			for item, p := range m {
				if len(p.SHA256) != 64 {
					return nil, fmt.Errorf("%s: upstream %q: %q: sha256 must be 64 hex digits", path, name, item)
				}
			}
		}
	}
	return &f, nil
}

// Marshal encodes the pins file, keys sorted, with a header comment.
func (f *PinsFile) Marshal() ([]byte, error) {
	f.Version = PinsVersion
	var buf bytes.Buffer
	buf.WriteString("# Pinned tool and prompt definitions, written by `gateway pin`.\n" +
		"# A definition that differs from its pin is handled as the upstream's\n" +
		"# pin.on_change says. Review a change, then run `gateway pin` again and\n" +
		"# reload to accept it.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// pins checks the pins file and the pin policies of the upstreams, and
// gives each its pins.
func (v *validator) pins(c *Config) {
	var f *PinsFile
	if c.Pins.File != "" && !v.skipped("pins.file") {
		var err error
		if f, err = ReadPins(c.Pins.File); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				// Not an error, so that `gateway pin` can write it: every
				// item is then new (upstreams[].pin.new decides).
				v.warnf("pins.file", "%s does not exist: nothing is pinned; write it with `gateway pin`", c.Pins.File)
			} else {
				v.addf("pins.file", "%v", err)
			}
		}
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		p := u.Pin
		if p == nil {
			continue
		}
		path := fmt.Sprintf("upstreams[%d].pin", i)
		if c.Pins.File == "" {
			v.addf(path, "needs pins.file")
		}
		switch p.OnChange {
		case "", PinQuarantine, PinWarn, PinAllow:
		default:
			v.addf(path+".on_change", "unknown mode %q: must be %q, %q or %q", p.OnChange, PinQuarantine, PinWarn, PinAllow)
		}
		switch p.New {
		case "", PinAllow, PinQuarantine:
		default:
			v.addf(path+".new", "unknown mode %q: must be %q or %q", p.New, PinAllow, PinQuarantine)
		}
		if f != nil {
			p.pinned = f.Upstreams[u.Name]
		}
	}
	if f != nil {
		for _, name := range slices.Sorted(maps.Keys(f.Upstreams)) {
			if c.Upstream(name) == nil {
				v.warnf("pins.file", "pins upstream %q, which is not configured", name)
			}
		}
	}
}
