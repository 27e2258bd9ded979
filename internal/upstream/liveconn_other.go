//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package upstream

// peekSupported says peekFD can tell a closed connection on this platform.
const peekSupported = false

// peekFD cannot tell on this platform: the request is written, and if the
// connection turns out to be closed the call fails as it would without the
// check.
func (c *liveConn) peekFD(uintptr) {}
