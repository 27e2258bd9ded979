package config

import "strings"

// expand replaces each ${NAME} in s with getenv(NAME). "$$" stands for a
// literal "$", and a "$" followed by anything other than "{" or "$" is kept
// as it is.
//
// getenv returning "" counts as the variable being unset: a header that
// expands to nothing is almost certainly a deployment mistake, and the
// func(string) string signature cannot tell unset from empty anyway.
//
// expand reports one message per problem (an unset variable, an empty or
// invalid name, an unterminated "${"). Because s is a secret, messages name
// the variable at most and never quote s or any part of it that is not a
// valid variable name.
// unsetPrefix begins the message of an unset variable.
const unsetPrefix = "environment variable "

func expand(s string, getenv func(string) string) (string, []string) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var (
		b    strings.Builder
		errs []string
	)
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			s = s[i+2:]
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				errs = append(errs, `unterminated "${" (write "$$" for a literal "$")`)
				return "", errs
			}
			name := s[i+2 : i+2+end]
			s = s[i+2+end+1:]
			switch {
			case name == "":
				errs = append(errs, `empty variable name in "${}"`)
			case !isVarName(name):
				// Don't quote it: a malformed reference may be a pasted secret.
				errs = append(errs, `invalid variable name in "${...}": want letters, digits and underscores, not starting with a digit`)
			default:
				v := getenv(name)
				if v == "" {
					errs = append(errs, unsetPrefix+name+" is not set")
				}
				b.WriteString(v)
			}
		default:
			b.WriteByte('$')
			s = s[i+1:]
		}
	}
	if len(errs) > 0 {
		return "", errs
	}
	return b.String(), nil
}

// isVarName reports whether name is a portable environment variable name:
// [A-Za-z_][A-Za-z0-9_]*.
func isVarName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return name != ""
}
