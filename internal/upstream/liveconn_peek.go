//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package upstream

import "syscall"

// peekSupported says peekFD can tell a closed connection on this platform.
const peekSupported = true

// peekFD peeks one byte without blocking: no data and no error is the
// peer's end of the stream, ECONNRESET its reset. Anything else (data, "would
// block", another error) proves nothing, and the request goes ahead.
func (c *liveConn) peekFD(fd uintptr) {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	c.closed = (n == 0 && err == nil) || err == syscall.ECONNRESET
}
