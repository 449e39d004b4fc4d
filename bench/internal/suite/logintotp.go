package suite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/gatehouse-id/gatehouse/bench/internal/load"
)

// TOTPPerson is a human user with a TOTP generator: the password, then a
// code of the generator.
type TOTPPerson struct {
	Person
	Secret string
	// enrolledStep is the step whose code verified the registration
	// (spent).
	enrolledStep int64
}

// totpPeriod is the server's time step (RFC 6238's 30 s).
const totpPeriod = 30

// totpUsers hands out users with a code none of their logins used: the
// server accepts a code once per user and time step, of the step before,
// at or after the current one. A login here uses the current step or the
// next, so a user signs in at most twice in a row and once per step after
// that. Enough users (PrepareTOTP) keep the scenario from running out.
type totpUsers struct {
	mu    sync.Mutex
	idle  []*totpUser
	clock func() time.Time
}

type totpUser struct {
	TOTPPerson
	last int64 // the last step used (enrollment included)
}

// take returns a user and the code of its next unused step, or an error
// when every idle user has used every step the server accepts now.
func (p *totpUsers) take() (*totpUser, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock()
	cur := now.Unix() / totpPeriod
	for i, u := range p.idle {
		// Not the step before: a login takes up to a second, and the
		// server would by then count that step two behind.
		step := max(u.last+1, cur)
		if step > cur+1 {
			continue
		}
		code, err := totp.GenerateCode(u.Secret, time.Unix(step*totpPeriod, 0))
		if err != nil {
			return nil, "", err
		}
		u.last = step
		p.idle = append(p.idle[:i], p.idle[i+1:]...)
		return u, code, nil
	}
	return nil, "", errors.New("every TOTP user has used the codes the server accepts now (more users in PrepareTOTP)")
}

func (p *totpUsers) put(u *totpUser) {
	p.mu.Lock()
	p.idle = append(p.idle, u)
	p.mu.Unlock()
}

// loginTOTPOp is loginOp for users with a TOTP generator: the password
// page is followed by the code page, whose code is accepted once.
func loginTOTPOp(ctx context.Context, c *http.Client, t Target, f *Fixture) (load.Op, error) {
	if len(f.TOTPUsers) == 0 {
		return nil, errors.New("no TOTP users to sign in (PrepareTOTP)")
	}
	pool := &totpUsers{clock: time.Now}
	for _, u := range f.TOTPUsers {
		pool.idle = append(pool.idle, &totpUser{TOTPPerson: u, last: u.enrolledStep})
	}
	op := func(ctx context.Context) (int, error) {
		u, code, err := pool.take()
		if err != nil {
			return 0, err
		}
		defer pool.put(u)
		return loginWith(ctx, newBrowser(t.Base, c.Transport), c, t.Base, f.Web, u.Person, func(ctx context.Context, b *http.Client, p page) (page, error) {
			p, err := submit(ctx, b, p, "code", code)
			if err != nil {
				return p, fmt.Errorf("code page: %w", err)
			}
			return p, nil
		})
	}
	if _, err := op(ctx); err != nil {
		return nil, fmt.Errorf("first login: %w", err)
	}
	return op, nil
}

// PrepareTOTP adds n users with a TOTP generator to f, registered and
// verified through the v2 user service as an admin would: RegisterTOTP,
// then VerifyTOTPRegistration with the current step's code.
func PrepareTOTP(ctx context.Context, t Target, f *Fixture, n int) error {
	if f.m.c == nil {
		return errors.New("the fixture was not made by Prepare")
	}
	v2 := mgmt{c: f.m.c, base: t.Base, token: f.m.token}
	suffix := randomHex(4)
	for i := range n {
		p, err := addUser(ctx, f.m, fmt.Sprintf("bench-totp-%s-%d", suffix, i))
		if err != nil {
			return err
		}
		var reg struct {
			Secret string `json:"secret"`
		}
		path := "/v2/users/" + url.PathEscape(p.ID) + "/totp"
		if err := v2.do(ctx, http.MethodPost, path, map[string]any{}, &reg); err != nil {
			return fmt.Errorf("register TOTP of %s: %w", p.LoginName, err)
		}
		now := time.Now()
		code, err := totp.GenerateCode(reg.Secret, now)
		if err != nil {
			return err
		}
		if err := v2.do(ctx, http.MethodPost, path+"/verify", map[string]any{"code": code}, nil); err != nil {
			return fmt.Errorf("verify TOTP of %s: %w", p.LoginName, err)
		}
		f.TOTPUsers = append(f.TOTPUsers, TOTPPerson{Person: p, Secret: reg.Secret, enrolledStep: now.Unix() / totpPeriod})
	}
	return nil
}
