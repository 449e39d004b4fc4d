package redirecturi

import (
	"slices"
	"strconv"
	"strings"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// AppTypeNative is Client.app_type of a native app.
const AppTypeNative = "native"

// Registered reports whether uri is one of the client's redirect URIs
// (Match, native when the client is a native app).
func Registered(c *directoryv1.Client, uri string) bool {
	return Match(c.GetRedirectUris(), uri, c.GetAppType() == AppTypeNative)
}

// Match reports whether requested equals one of registered. For a native
// app it also accepts requested when it differs from a registered
// loopback URI only in the port (RFC 8252 §7.3: the app listens on a port
// the operating system picks at the time of the request).
func Match(registered []string, requested string, native bool) bool {
	if slices.Contains(registered, requested) {
		return true
	}
	if !native {
		return false
	}
	host, rest, ok := loopback(requested)
	if !ok || strings.Contains(rest, "#") {
		return false // a fragment is never allowed in a redirect URI
	}
	for _, r := range registered {
		if h, rr, ok := loopback(r); ok && h == host && rr == rest {
			return true
		}
	}
	return false
}

// loopback splits an "http://" URI whose authority is exactly an IP
// loopback literal, 127.0.0.1 or [::1], with an optional port, into that
// host and everything after the authority (path, query, fragment). Only IP
// literals: RFC 8252 §8.3 advises against "localhost", which a resolver may
// send elsewhere. Userinfo, other hosts and malformed ports fail.
func loopback(uri string) (host, rest string, ok bool) {
	after, found := strings.CutPrefix(uri, "http://")
	if !found {
		return "", "", false
	}
	end := strings.IndexAny(after, "/?#")
	if end < 0 {
		end = len(after)
	}
	authority, rest := after[:end], after[end:]
	for _, h := range []string{"127.0.0.1", "[::1]"} {
		port, found := strings.CutPrefix(authority, h)
		if !found {
			continue
		}
		if port == "" || validPort(port) {
			return h, rest, true
		}
	}
	return "", "", false
}

// validPort reports whether p is ":" and a port number 1-65535 written
// without sign or leading zeros.
func validPort(p string) bool {
	digits, ok := strings.CutPrefix(p, ":")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(digits)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == digits
}
