//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package upstream

import "syscall"

// hasUnread reports whether data waits to be read on c, peeking without
// reading it.
func hasUnread(c *liveConn) bool {
	n := 0
	err := c.raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return err == nil && n > 0
}
