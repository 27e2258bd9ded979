package protocol

import "strings"

// UpdateCovers reports whether an update of resource uri
// (notifications/resources/updated) belongs to a subscription of
// subscribed: uri is subscribed itself or one of its sub-resources, which
// the notification may name instead ("This might be a sub-resource of the
// one that the client actually subscribed to", schema
// ResourceUpdatedNotificationParams, 2025-11-25 and 2026-07-28). A
// sub-resource continues subscribed's path: past a "/" that ends
// subscribed, or past a "/", "?" or "#" that follows it, so that
// "mem://a" covers "mem://a/x" and "mem://a?v=2" but not "mem://ab".
func UpdateCovers(subscribed, uri string) bool {
	if !strings.HasPrefix(uri, subscribed) || subscribed == "" {
		return false
	}
	if len(uri) == len(subscribed) || strings.HasSuffix(subscribed, "/") {
		return true
	}
	switch uri[len(subscribed)] {
	case '/', '?', '#':
		return true
	}
	return false
}
