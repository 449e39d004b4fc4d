package router

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// What a budget is keyed by: the "key" label of the rejection metric.
const (
	byAddress    = "address"
	byClient     = "client"
	byToken      = "token"
	byAddressCap = "address_cap"
	byPassword   = "password"
)

// MaxPeekBytes bounds how much of a token, introspection or revocation body
// edge reads to find the client it names; a client_id past it is not seen
// and the request is charged to its address. A token request with a client
// assertion and a PKCE verifier is well under 2 KiB.
const MaxPeekBytes = 4 << 10

// rateKey returns the limiter key of r in class, and what it is keyed by.
// Keys of different classes never collide (each has its own prefix; the
// browser class keeps the bare address key), nor do a class's keys by
// client and address, token or address ("id:…@", "idh:…@", "tok:", "ip4:",
// "ip6:", "addr:").
func rateKey(r *http.Request, class routes.Class, client string) (key, by string) {
	switch class {
	case routes.ClassClient:
		if id := clientID(r); id != "" {
			// Per client and address: the id is unverified and public (it
			// is in every authorization URL), so a budget of the id alone
			// was anyone's to spend, and one address naming a relying
			// party's id shut its token endpoint for all its users.
			return "client:" + idKey(id) + "@" + addressKey(client), byClient
		}
		return "client:" + addressKey(client), byAddress
	case routes.ClassAPI:
		if tok := bearer(r); tok != "" {
			return "api:" + tokenKey(tok), byToken
		}
		return "api:" + addressKey(client), byAddress
	}
	return addressKey(client), byAddress
}

// addressKey is the limiter key for a client address. IPv6 clients are
// keyed by their /64: one host commonly holds a whole /64, and keying
// single addresses would give it billions of buckets.
func addressKey(client string) string {
	a, err := netip.ParseAddr(client)
	if err != nil {
		return "addr:" + client
	}
	if a.Is6() {
		return "ip6:" + netip.PrefixFrom(a, 64).Masked().String()
	}
	return "ip4:" + a.String()
}

// idKey keys a client id: as it is when short and printable (readable in
// Redis), else by its hash.
func idKey(id string) string {
	if len(id) <= 128 && printable(id) {
		return "id:" + id
	}
	sum := sha256.Sum256([]byte(id))
	return "idh:" + hex.EncodeToString(sum[:16])
}

// tokenKey keys a bearer token by its hash: the token itself never leaves
// edge's memory.
func tokenKey(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return "tok:" + hex.EncodeToString(sum[:16])
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// bearer is the token of an Authorization header of scheme Bearer or DPoP
// (RFC 6750, RFC 9449), or "".
func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !(strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "DPoP")) {
		return ""
	}
	return strings.TrimSpace(tok)
}

// clientID is the client a token, introspection or revocation request
// names, unverified (tokens authenticates it; a budget per claimed client
// is what the address cap bounds): the HTTP Basic user, form-urlencoded
// (RFC 6749 §2.3.1), else the form's client_id, else the subject of its
// client_assertion, which RFC 7523 §3 makes the client id. "" for none.
func clientID(r *http.Request) string {
	if user, _, ok := r.BasicAuth(); ok {
		if u, err := url.QueryUnescape(user); err == nil {
			user = u
		}
		if user != "" {
			return user
		}
	}
	form := peekForm(r, MaxPeekBytes)
	var assertion string
	for len(form) > 0 {
		var pair []byte
		pair, form, _ = bytes.Cut(form, []byte("&"))
		k, v, _ := bytes.Cut(pair, []byte("="))
		name := string(k)
		if bytes.ContainsAny(k, "%+") {
			if n, err := url.QueryUnescape(name); err == nil {
				name = n
			}
		}
		switch name {
		case "client_id":
			if id, err := url.QueryUnescape(string(v)); err == nil && id != "" {
				return id
			}
		case "client_assertion":
			if assertion == "" {
				assertion = string(v)
			}
		}
	}
	if assertion == "" {
		return ""
	}
	if a, err := url.QueryUnescape(assertion); err == nil {
		return assertionSubject(a)
	}
	return ""
}

// assertionSubject is the unverified sub, else iss, of a JWT.
func assertionSubject(jwt string) string {
	_, rest, ok := strings.Cut(jwt, ".")
	payload, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return ""
	}
	var claims struct {
		Sub any `json:"sub"`
		Iss any `json:"iss"`
	}
	if json.Unmarshal(b, &claims) != nil {
		return ""
	}
	for _, c := range []any{claims.Sub, claims.Iss} {
		if s, ok := c.(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// peekForm returns the start of r's body, at most limit bytes cut after the
// last complete parameter, when r is a POST of a form; otherwise nil. The
// bytes read are put back in front of the rest of the body, so the service
// (in process or behind the proxy) reads the body unchanged, read error
// included.
func peekForm(r *http.Request, limit int) []byte {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	if mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); !strings.EqualFold(strings.TrimSpace(mt), "application/x-www-form-urlencoded") {
		return nil
	}
	n := limit
	if r.ContentLength > 0 && r.ContentLength < int64(n) {
		n = int(r.ContentLength)
	}
	buf := make([]byte, n)
	got := 0
	var err error
	for got < n && err == nil {
		var m int
		m, err = r.Body.Read(buf[got:])
		got += m
	}
	buf = buf[:got]
	rest := io.Reader(r.Body)
	whole := err == io.EOF || int64(got) == r.ContentLength
	if err != nil {
		rest = errReader{err}
	}
	r.Body = replayBody{Reader: io.MultiReader(bytes.NewReader(buf), rest), Closer: r.Body}
	if !whole {
		i := bytes.LastIndexByte(buf, '&')
		if i < 0 {
			return nil
		}
		buf = buf[:i]
	}
	return buf
}

// replayBody reads what peekForm read, then the rest of the body.
type replayBody struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
