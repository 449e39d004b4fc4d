package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Names of the user-agent cookie. On https the __Host- prefix makes the
// browser refuse one set without Secure, with a Domain or another Path.
const (
	CookieName       = "gatehouse_ua"
	SecureCookieName = "__Host-gatehouse_ua"
)

// CookieNameFor is the cookie's name for an issuer: the plain name for
// one on its scheme's default port at the root, as before; otherwise the
// port (and a short hash of the path) are appended. Browsers keep cookies
// by host name, not port: two Gatehouses on one host (an upstream and a
// downstream in development) would otherwise overwrite each other's
// browser identity, and federation between them fail.
func CookieNameFor(issuer string, secure bool) string {
	name := CookieName
	if secure {
		name = SecureCookieName
	}
	u, err := url.Parse(issuer)
	if err != nil {
		return name
	}
	if p := u.Port(); p != "" {
		name += "_" + p
	}
	if path := strings.Trim(u.Path, "/"); path != "" {
		sum := sha256.Sum256([]byte(path))
		name += "_" + hex.EncodeToString(sum[:4])
	}
	return name
}

func (b *Browsers) cookieName() string {
	if b.Name != "" {
		return b.Name
	}
	if b.Secure {
		return SecureCookieName
	}
	return CookieName
}

// cookieMaxAge keeps the browser's sessions across browser restarts.
const cookieMaxAge = 400 * 24 * time.Hour

// Browsers finds or makes the user agent behind a request's cookie.
type Browsers struct {
	Store *Store
	// Secure marks the cookie Secure; set when the issuer is https.
	Secure bool
	// Name is the cookie's name (CookieNameFor the issuer); "" for the
	// plain one.
	Name string
	Now  func() time.Time
}

// Find returns the request's user agent, or ErrNotFound when the browser
// has no (valid) cookie.
func (b *Browsers) Find(ctx context.Context, r *http.Request) (UserAgent, error) {
	c, err := r.Cookie(b.cookieName())
	if err != nil || c.Value == "" {
		return UserAgent{}, fmt.Errorf("user agent cookie: %w", ErrNotFound)
	}
	return ParseUserAgent(c.Value)
}

// Ensure returns the request's user agent, making one and setting its
// cookie on w when the browser has none (nothing is stored: see
// NewUserAgent).
func (b *Browsers) Ensure(ctx context.Context, w http.ResponseWriter, r *http.Request) (UserAgent, error) {
	ua, err := b.Find(ctx, r)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return ua, err
	}
	cookie, ua := NewUserAgent()
	b.setCookie(w, cookie)
	return ua, nil
}

// SignIn records a successful authentication on the browser old for the
// pending request authRequestID (see Store.SignIn), gives the browser its
// new cookie, and returns its new identity and the session.
func (b *Browsers) SignIn(ctx context.Context, w http.ResponseWriter, old UserAgent, in Session, authRequestID string) (UserAgent, Session, error) {
	cookie, ua, s, err := b.Store.SignIn(ctx, old.ID, in, authRequestID, b.Now())
	if err != nil {
		return UserAgent{}, Session{}, err
	}
	b.setCookie(w, cookie)
	return ua, s, nil
}

func (b *Browsers) setCookie(w http.ResponseWriter, cookie string) {
	http.SetCookie(w, &http.Cookie{
		Name:     b.cookieName(),
		Value:    cookie,
		Path:     "/",
		MaxAge:   int(cookieMaxAge / time.Second),
		HttpOnly: true,
		Secure:   b.Secure,
		SameSite: http.SameSiteLaxMode,
	})
}
