package users

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"github.com/pquerna/otp/totp"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
)

// Factor events, on the user aggregate (ZITADEL's event names).
const (
	EventOTPAdded    = "user.human.mfa.otp.added"
	EventOTPVerified = "user.human.mfa.otp.verified"
	EventOTPRemoved  = "user.human.mfa.otp.removed"
	// EventOTPChecked recorded an accepted code's time step. Checks now
	// update user_factors.last_step directly (TOTPGuess); the reducer
	// stays for the events stored before.
	EventOTPChecked = "user.human.mfa.otp.check.succeeded"
)

// Factor types (user_factors.type) and states (ZITADEL's AuthFactorState
// numbers).
const (
	FactorOTP          = "otp"
	FactorU2F          = "u2f"
	FactorPasswordless = "passwordless"

	FactorNotReady int32 = 1
	FactorReady    int32 = 2
)

// TOTP parameters: RFC 6238's defaults, which every authenticator app
// reads (SHA-1, 6 digits, 30 s); a code of the step before or after the
// current one is accepted (clock skew).
const (
	TOTPPeriod = 30
	TOTPSkew   = 1
	totpSecret = 20 // bytes, RFC 4226's recommended 160 bits
)

var totpOpts = hotp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// Factor is a human user's authentication factor besides the password.
type Factor struct {
	ID           string    `db:"id"`
	UserID       string    `db:"user_id"`
	OrgID        string    `db:"org_id"`
	Type         string    `db:"type"`
	State        int32     `db:"state"`
	Name         string    `db:"name"`
	Secret       []byte    `db:"secret"` // sealed (FactorSecrets); TOTP only
	LastStep     int64     `db:"last_step"`
	StartedBy    string    `db:"started_by"`    // who started the registration
	CredentialID []byte    `db:"credential_id"` // WebAuthn only
	Credential   string    `db:"credential"`    // WebAuthn: the credential record (JSON)
	Challenge    string    `db:"challenge"`     // WebAuthn: a started registration's ceremony
	CreationDate time.Time `db:"creation_date"`
	ChangeDate   time.Time `db:"change_date"`
	Sequence     uint64    `db:"sequence"`
}

// Ready reports whether the factor completed its registration.
func (f Factor) Ready() bool { return f.State == FactorReady }

type otpAdded struct {
	ID string `json:"id"`
	// Secret is the seed sealed with the master key (FactorSecrets),
	// never the seed itself: the event table is the audit log.
	Secret []byte `json:"secret"`
}

type factorRef struct {
	ID string `json:"id"`
	// EndSessions: removed by someone else than the user (an admin), so
	// the user's sessions end and its tokens are revoked, as at an admin
	// password reset: a factor someone else removes may be one an attacker
	// enrolled.
	EndSessions bool `json:"endSessions,omitempty"`
}

type otpChecked struct {
	ID   string `json:"id"`
	Step int64  `json:"step"`
}

// FactorSecrets seals TOTP seeds at rest (secrets.PurposeFactorSecrets),
// bound to the factor and user ids.
type FactorSecrets struct{ Cipher *secrets.Cipher }

func (s FactorSecrets) seal(userID, factorID, seed string) ([]byte, error) {
	return s.Cipher.Encrypt([]byte(seed), []byte(userID+"/"+factorID))
}

func (s FactorSecrets) open(f *Factor) (string, error) {
	b, err := s.Cipher.Decrypt(f.Secret, []byte(f.UserID+"/"+f.ID))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func registerFactors(es *eventstore.Store) {
	es.Register(EventOTPAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p otpAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		// A registration started again replaces the unfinished one.
		if _, err := tx.Exec(ctx, `DELETE FROM user_factors WHERE user_id = ? AND type = ? AND state = ?`,
			e.AggregateID, FactorOTP, FactorNotReady); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO user_factors (id, user_id, org_id, type, state, secret, started_by, creation_date, change_date, sequence)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, p.ID, e.AggregateID, e.ResourceOwner, FactorOTP, FactorNotReady, p.Secret, e.Editor,
			e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventOTPVerified, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p otpChecked
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE user_factors SET state = ?, last_step = ?, change_date = ?, sequence = ? WHERE id = ?`,
			FactorReady, p.Step, e.CreatedAt, e.Sequence, p.ID); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventOTPChecked, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p otpChecked
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE user_factors SET last_step = ? WHERE id = ? AND last_step < ?`, p.Step, p.ID, p.Step); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventOTPRemoved, factorRemoved)
	registerRecoveryCodes(es)
	registerWebAuthn(es)
	registerSignOut(es)
	registerCodes(es)
}

// factorRemoved reduces the removal of a factor of any type (factorRef).
func factorRemoved(ctx context.Context, tx db.Querier, e eventstore.Event) error {
	var p factorRef
	if err := e.Unmarshal(&p); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM user_factors WHERE id = ?`, p.ID); err != nil {
		return err
	}
	if p.EndSessions {
		if err := CutAccess(ctx, tx, e.AggregateID, e.CreatedAt); err != nil {
			return err
		}
	}
	return touch(ctx, tx, e)
}

// Factors returns the user's factors, oldest first.
func (q *Queries) Factors(ctx context.Context, userID string) ([]Factor, error) {
	var out []Factor
	err := q.DB.Select(ctx, &out, `SELECT id, user_id, org_id, type, state, name, secret, last_step, started_by,
		credential_id, credential, challenge, creation_date, change_date, sequence
		FROM user_factors WHERE user_id = ? ORDER BY creation_date, id`, userID)
	return out, err
}

// GetForTOTP reads, in one statement, what a TOTP code's check needs: the
// user, its organization's opt-in account lock (as GetWithLockout), its
// TOTP factor, ready or not (nil without one), a's locks at now
// (lockout.Attempt.Locked, with the organization's account lock) and its
// counters (lockout.Attempt.Counted).
func GetForTOTP(ctx context.Context, q db.Querier, userID string, a lockout.Attempt, now time.Time) (TOTPRead, error) {
	var row struct {
		User
		LockoutAttempts int            `db:"org_lockout_attempts"`
		FactorID        sql.NullString `db:"factor_id"`
		FactorState     sql.NullInt32  `db:"factor_state"`
		FactorSecret    []byte         `db:"factor_secret"`
		FactorLastStep  sql.NullInt64  `db:"factor_last_step"`
		Locked          int            `db:"locked"`
		Counted         int            `db:"counted"`
	}
	locked, args := a.Locked(now, "o.lockout_max_attempts")
	counted, cargs := a.Counted()
	if err := q.Get(ctx, &row, `SELECT `+Columns+`, o.lockout_max_attempts AS org_lockout_attempts,
		f.id AS factor_id, f.state AS factor_state, f.secret AS factor_secret, f.last_step AS factor_last_step,
		`+locked+` AS locked, `+counted+` AS counted`+From+`
		LEFT JOIN user_factors f ON f.user_id = u.id AND f.type = ? WHERE u.id = ?`, append(append(args, cargs...), FactorOTP, userID)...); err != nil {
		return TOTPRead{}, db.NotFound(err)
	}
	r := TOTPRead{User: &row.User, MaxFailures: row.LockoutAttempts, Locked: row.Locked, Counted: row.Counted}
	if row.FactorID.Valid {
		r.Factor = &Factor{ID: row.FactorID.String, UserID: row.ID, Type: FactorOTP, State: row.FactorState.Int32,
			Secret: row.FactorSecret, LastStep: row.FactorLastStep.Int64}
	}
	return r, nil
}

// TOTPRead is what a TOTP code's check reads in one statement
// (GetForTOTP).
type TOTPRead struct {
	User *User
	// MaxFailures is the organization's lockout_max_attempts.
	MaxFailures int
	// Factor is the user's TOTP factor, ready or not; nil for none.
	Factor *Factor
	// Locked and Counted are the attempt's (lockout.Attempt.Locked and
	// Counted), for lockout.Store.Guard.
	Locked, Counted int
}

// SecondFactorTypes returns the types of the user's ready second factors
// (passkeys are a first factor), each once, oldest first: what a
// password check answers on every login, so it reads the type alone.
func (q *Queries) SecondFactorTypes(ctx context.Context, userID string) ([]string, error) {
	var types []string
	if err := q.DB.Select(ctx, &types, `SELECT type FROM user_factors WHERE user_id = ? AND state = ? AND type <> ?
		ORDER BY creation_date, id`, userID, FactorReady, FactorPasswordless); err != nil {
		return nil, err
	}
	out := types[:0]
	for _, t := range types {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// otpFactor returns the user's TOTP factor (ready or not), or nil.
func (q *Queries) otpFactor(ctx context.Context, userID string) (*Factor, error) {
	fs, err := q.Factors(ctx, userID)
	if err != nil {
		return nil, err
	}
	for i := range fs {
		if fs[i].Type == FactorOTP {
			return &fs[i], nil
		}
	}
	return nil, nil
}

// human refuses machine users: factors are for people.
func human(u *User) error {
	if u.Type != TypeHuman {
		return apierr.NotFound("USER-not-human", "human user not found")
	}
	return nil
}

// TOTPRegistration is a started TOTP registration: the otpauth:// URI an
// authenticator app reads (as a QR code) and its secret as text.
type TOTPRegistration struct {
	URI    string
	Secret string
}

// StartTOTP starts a TOTP registration for u: a new seed, sealed at rest,
// not yet usable at login (VerifyTOTP completes it). issuer names the
// account in the authenticator app. A user whose TOTP is ready already is
// AlreadyExists (remove it first); an unfinished registration is replaced.
func (c *Commands) StartTOTP(ctx context.Context, editor string, u *User, fs FactorSecrets, issuer string) (TOTPRegistration, []eventstore.Event, error) {
	if err := human(u); err != nil {
		return TOTPRegistration{}, nil, err
	}
	cur, err := c.Q.otpFactor(ctx, u.ID)
	if err != nil {
		return TOTPRegistration{}, nil, err
	}
	if cur != nil && cur.Ready() {
		return TOTPRegistration{}, nil, apierr.AlreadyExists("USER-otp-exists", "the user has a TOTP generator already; remove it first")
	}
	key, err := totpKey(u, issuer, nil)
	if err != nil {
		return TOTPRegistration{}, nil, err
	}
	id := secrets.NewID()
	sealed, err := fs.seal(u.ID, id, key.Secret())
	if err != nil {
		return TOTPRegistration{}, nil, err
	}
	evs, err := c.push(ctx, editor, u, EventOTPAdded, otpAdded{ID: id, Secret: sealed})
	if err != nil {
		return TOTPRegistration{}, nil, err
	}
	return TOTPRegistration{URI: key.URL(), Secret: key.Secret()}, evs, nil
}

// totpKey makes the key of u's generator: a new random seed, or seed.
func totpKey(u *User, issuer string, seed []byte) (*otp.Key, error) {
	return totp.Generate(totp.GenerateOpts{Issuer: issuer, AccountName: u.LoginName(), Period: TOTPPeriod,
		SecretSize: totpSecret, Secret: seed, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
}

// ResumeTOTP returns u's unfinished TOTP registration if u started it (a
// login's enrollment page shown again must show the generator the user
// may have scanned already), else starts one (StartTOTP) as u. One an
// admin started is replaced: its secret was shown to the admin.
func (c *Commands) ResumeTOTP(ctx context.Context, u *User, fs FactorSecrets, issuer string) (TOTPRegistration, error) {
	if err := human(u); err != nil {
		return TOTPRegistration{}, err
	}
	cur, err := c.Q.otpFactor(ctx, u.ID)
	if err != nil {
		return TOTPRegistration{}, err
	}
	if cur == nil || cur.Ready() || cur.StartedBy != u.ID {
		reg, _, err := c.StartTOTP(ctx, u.ID, u, fs, issuer)
		return reg, err
	}
	seed, err := fs.open(cur)
	if err != nil {
		return TOTPRegistration{}, err
	}
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(seed)
	if err != nil {
		return TOTPRegistration{}, fmt.Errorf("users: stored TOTP seed: %w", err)
	}
	key, err := totpKey(u, issuer, raw)
	if err != nil {
		return TOTPRegistration{}, err
	}
	return TOTPRegistration{URI: key.URL(), Secret: key.Secret()}, nil
}

// ErrBadCode is a TOTP or recovery code that is wrong, used already, or
// of a time step at or before the last one accepted.
var ErrBadCode = errors.New("users: the code is not valid")

// matchStep returns the time step within the skew whose code is code and
// which comes after last, or ErrBadCode. The comparison is in constant
// time per step.
func matchStep(seed, code string, last int64, now time.Time) (int64, error) {
	if len(code) != int(otp.DigitsSix) {
		return 0, ErrBadCode
	}
	cur := now.Unix() / TOTPPeriod
	for step := cur - TOTPSkew; step <= cur+TOTPSkew; step++ {
		if step <= last || step < 0 {
			continue
		}
		want, err := hotp.GenerateCodeCustom(seed, uint64(step), totpOpts)
		if err != nil {
			return 0, err
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return step, nil
		}
	}
	return 0, ErrBadCode
}

// VerifyTOTP completes u's TOTP registration with a code of the new
// generator. No registration started is Precondition; a wrong code is
// InvalidArgument and changes nothing.
func (c *Commands) VerifyTOTP(ctx context.Context, editor string, u *User, fs FactorSecrets, code string, now time.Time) ([]eventstore.Event, error) {
	if err := human(u); err != nil {
		return nil, err
	}
	f, err := c.Q.otpFactor(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	if f == nil || f.Ready() {
		return nil, apierr.Precondition("USER-otp-not-started", "no TOTP registration was started")
	}
	seed, err := fs.open(f)
	if err != nil {
		return nil, err
	}
	step, err := matchStep(seed, code, f.LastStep, now)
	if errors.Is(err, ErrBadCode) {
		return nil, apierr.InvalidArgument("USER-otp-invalid-code", "the code is not valid")
	}
	if err != nil {
		return nil, err
	}
	return c.push(ctx, editor, u, EventOTPVerified, otpChecked{ID: f.ID, Step: step})
}

// TOTPGuess is a login's code as a guess of f, the user's TOTP factor as
// read by GetForTOTP (nil when it has none), for lockout.Store.Guard: a
// right code's record is the conditional update of f's step, so the code
// is never accepted again. No factor, one not ready, a wrong code, and a
// code of a step already used or at most c.StepFloor are wrong; of two
// checks racing with one code, one records it.
//
// The step is recorded by one conditional update rather than an event
// (this is the login's hot path), through the relaxed database: a crash
// of the machine may forget the last steps recorded on SQLite, which the
// next start fails closed with StepFloor (StepFloorAfter).
func (c *Commands) TOTPGuess(f *Factor, fs FactorSecrets, code string, now time.Time) lockout.Guess {
	return func() (string, []any, error) {
		if f == nil || !f.Ready() {
			return "", nil, nil
		}
		seed, err := fs.open(f)
		if err != nil {
			return "", nil, err
		}
		step, err := matchStep(seed, code, max(f.LastStep, c.StepFloor), now)
		if errors.Is(err, ErrBadCode) {
			return "", nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		return `UPDATE user_factors SET last_step = ? WHERE id = ? AND state = ? AND last_step < ?`,
			[]any{step, f.ID, FactorReady, step}, nil
	}
}

// StepFloorAfter is the StepFloor of a start at now after a process that
// did not close its SQLite database (db.DB.CleanStart): every step a code
// accepted before the stop can have matched (the clock's step and the one
// after it), so that a step whose record the crash lost is never accepted
// again. Codes work again one to two periods later.
func StepFloorAfter(now time.Time) int64 { return now.Unix()/TOTPPeriod + TOTPSkew }

// RemoveTOTP removes u's TOTP generator, ready or not, and its recovery
// codes in the same change: codes printed for a lost or stolen generator
// must not outlive it into the next one. Without a generator it is
// NotFound. endSessions: see factorRef.
func (c *Commands) RemoveTOTP(ctx context.Context, editor string, u *User, endSessions bool) ([]eventstore.Event, error) {
	if err := human(u); err != nil {
		return nil, err
	}
	f, err := c.Q.otpFactor(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, apierr.NotFound("USER-otp-not-found", "the user has no TOTP generator")
	}
	evs := []eventstore.Pending{{Type: EventOTPRemoved, Payload: factorRef{ID: f.ID, EndSessions: endSessions}}}
	left, err := c.Q.RecoveryCodesLeft(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	if left > 0 {
		evs = append(evs, eventstore.Pending{Type: EventRecoveryCodesRemoved, Payload: factorRef{}})
	}
	return c.pushAll(ctx, editor, u, evs)
}
