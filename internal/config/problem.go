package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// A Problem is one thing wrong with a configuration, with where it is.
//
// Messages never contain secrets: upstream header values and the Redis
// password.
type Problem struct {
	// File is the config file's path; "" for a config built in code.
	File string
	// Line and Col locate the problem in File, starting at 1; 0 when
	// unknown (always for a config built in code).
	Line, Col int
	// Path names the offending setting, such as "upstreams[1].url"; "" when
	// the problem concerns the file as a whole (a YAML syntax error).
	Path string
	// Msg says what is wrong.
	Msg string
}

// Error formats p as "FILE:LINE: PATH: MSG", leaving out "FILE:" when File
// is "", "LINE:" when Line is 0, and "PATH: " when Path is "".
func (p Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteByte(':')
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, "%d:", p.Line)
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem found in a configuration. [Parse], [Load] and
// [Config.Validate] return a non-empty Problems as their error; use
// errors.As to get at the individual problems.
type Problems []Problem

// Error returns one problem per line, formatted as by [Problem.Error].
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// sort orders ps by position in the file. The sort is stable so that
// problems at the same position (or without one) keep the order in which
// they were found.
func (ps Problems) sort() {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
}

// err returns ps as an error, or nil when there are no problems: a nil
// Problems stored in an error interface would not compare equal to nil.
func (ps Problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	ps.sort()
	return ps
}
