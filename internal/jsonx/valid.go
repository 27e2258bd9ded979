package jsonx

import "encoding/binary"

// Valid reports whether data is one valid JSON value (RFC 8259), exactly as
// encoding/json.Valid does — same leniency on UTF-8 in strings, same nesting
// limit — but several times faster: a tight loop over bytes instead of a
// state machine called per byte. Every message from a client and from an
// upstream passes through it once, so its speed is the gateway's speed on
// large payloads. FuzzValid holds it to encoding/json's answers.
func Valid(data []byte) bool {
	i := skipSpace(data, 0)
	i, ok := validValue(data, i, 0)
	if !ok {
		return false
	}
	return skipSpace(data, i) == len(data)
}

// ValidWithin is Valid for data whose objects and arrays nest at most
// max deep (max ≤ encoding/json's limit, 10000).
func ValidWithin(data []byte, max int) bool {
	if max > maxDepth {
		max = maxDepth
	}
	i := skipSpace(data, 0)
	// validValue refuses what nests past maxDepth: start it deeper.
	i, ok := validValue(data, i, maxDepth-max)
	if !ok {
		return false
	}
	return skipSpace(data, i) == len(data)
}

// maxDepth is encoding/json's nesting limit (scanner.go maxNestingDepth).
const maxDepth = 10000

func validValue(data []byte, i, depth int) (int, bool) {
	if i >= len(data) {
		return i, false
	}
	switch c := data[i]; {
	case c == '"':
		return validString(data, i)
	case c == '{':
		if depth+1 > maxDepth {
			return i, false
		}
		i = skipSpace(data, i+1)
		if i < len(data) && data[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(data) || data[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = validString(data, i); !ok {
				return i, false
			}
			i = skipSpace(data, i)
			if i >= len(data) || data[i] != ':' {
				return i, false
			}
			i = skipSpace(data, i+1)
			if i, ok = validValue(data, i, depth+1); !ok {
				return i, false
			}
			i = skipSpace(data, i)
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case ',':
				i = skipSpace(data, i+1)
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		if depth+1 > maxDepth {
			return i, false
		}
		i = skipSpace(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = validValue(data, i, depth+1); !ok {
				return i, false
			}
			i = skipSpace(data, i)
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case ',':
				i = skipSpace(data, i+1)
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == 't':
		return validLiteral(data, i, "true")
	case c == 'f':
		return validLiteral(data, i, "false")
	case c == 'n':
		return validLiteral(data, i, "null")
	case c == '-' || ('0' <= c && c <= '9'):
		return validNumber(data, i)
	}
	return i, false
}

func validLiteral(data []byte, i int, lit string) (int, bool) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

func validString(data []byte, i int) (int, bool) {
	i++ // the opening quote
	for i < len(data) {
		// Eight bytes at a time while none of them needs a look: no
		// quote, no backslash, no control character (SWAR: the classic
		// "has a zero byte" and "has a byte less than n" tests).
		for i+8 <= len(data) {
			x := binary.LittleEndian.Uint64(data[i:])
			if hasLess(x, 0x20) || hasByte(x, '"') || hasByte(x, '\\') {
				break
			}
			i += 8
		}
		if i >= len(data) {
			break
		}
		c := data[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(data) {
				return i, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(data)-i < 6 {
					return i, false
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return i, false
					}
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			i++
		}
	}
	return i, false
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasLess reports whether any byte of x is less than n (n <= 128).
func hasLess(x uint64, n byte) bool { return (x-ones*uint64(n))&^x&highs != 0 }

// hasByte reports whether any byte of x equals b.
func hasByte(x uint64, b byte) bool {
	y := x ^ (ones * uint64(b))
	return (y-ones)&^y&highs != 0
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func validNumber(data []byte, i int) (int, bool) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return i, false
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	default:
		return i, false
	}
	if i < len(data) && data[i] == '.' {
		i++
		start := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		if i == start {
			return i, false
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		start := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		if i == start {
			return i, false
		}
	}
	return i, true
}
