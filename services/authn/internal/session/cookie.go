package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Names of the user-agent cookie. On https the __Host- prefix makes the
// browser refuse one set without Secure, with a Domain or another Path.
const (
	CookieName       = "gatehouse_ua"
	SecureCookieName = "__Host-gatehouse_ua"
)

func (b *Browsers) cookieName() string {
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
	Now    func() time.Time
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
