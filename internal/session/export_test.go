package session

// InternedLen exposes the size of a Memory's intern table to the tests.
func InternedLen(m *Memory) int { return m.internedLen() }
