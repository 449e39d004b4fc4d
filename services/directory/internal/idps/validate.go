package idps

import (
	"net"
	"net/url"
	"strings"
)

// IssuerProblem returns why issuer cannot be an IdP's OIDC issuer, or "".
// An issuer is an absolute https URL without query or fragment (OpenID
// Connect Discovery 1.0 §3); plain http is accepted only for loopback hosts
// (localhost, 127.0.0.0/8, ::1), for development. Length is checked by the
// caller.
func IssuerProblem(issuer string) string {
	if strings.TrimSpace(issuer) != issuer {
		return "must not have leading or trailing whitespace"
	}
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme == "" || u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return "must be an absolute https URL"
	}
	if u.User != nil {
		return "must not contain user information"
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(issuer, "#") {
		return "must not have a query or fragment"
	}
	switch u.Scheme {
	case "https":
		return ""
	case "http":
		if isLoopback(u.Hostname()) {
			return ""
		}
		return "must use https (http is allowed only for localhost, 127.0.0.1 and ::1)"
	}
	return "must be an absolute https URL"
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ScopeProblem returns why s is not a scope token, or "". Scopes travel
// space-delimited, so each is a non-empty run of RFC 6749 §3.3 NQCHARs
// (printable ASCII except space, '"' and '\').
func ScopeProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return "must be printable ASCII without spaces, quotes or backslashes (RFC 6749 scope token)"
		}
	}
	return ""
}
