package users

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// WebAuthn factor events (ZITADEL's names): security keys are "u2f",
// passkeys "passwordless".
const (
	EventU2FAdded              = "user.human.u2f.token.added"
	EventU2FVerified           = "user.human.u2f.token.verified"
	EventU2FSignCount          = "user.human.u2f.token.signcount.changed"
	EventU2FRemoved            = "user.human.u2f.token.removed"
	EventPasswordlessAdded     = "user.human.passwordless.token.added"
	EventPasswordlessVerified  = "user.human.passwordless.token.verified"
	EventPasswordlessSignCount = "user.human.passwordless.token.signcount.changed"
	EventPasswordlessRemoved   = "user.human.passwordless.token.removed"
)

// webAuthnEvents names each WebAuthn type's events: added, verified, sign
// count, removed.
var webAuthnEvents = map[string][4]string{
	FactorU2F:          {EventU2FAdded, EventU2FVerified, EventU2FSignCount, EventU2FRemoved},
	FactorPasswordless: {EventPasswordlessAdded, EventPasswordlessVerified, EventPasswordlessSignCount, EventPasswordlessRemoved},
}

// CeremonyTimeout bounds a registration or login ceremony: the browser's
// prompt times out after it and the server refuses its answer.
const CeremonyTimeout = 5 * time.Minute

// ErrCloned is an assertion whose signature counter did not grow: a
// copy of the credential's key may be in use. It is refused like a bad
// code, and logged.
var ErrCloned = errors.New("users: the authenticator's signature counter went back")

// WebAuthn is the issuer's WebAuthn relying party: RP ID the issuer's
// host, the issuer's origin the one origin accepted.
type WebAuthn struct {
	rp *webauthn.WebAuthn
}

// NewWebAuthn is the relying party of issuer. WebAuthn does not accept an
// IP address as RP ID: on such an issuer it returns nil, and the factors
// answer ErrWebAuthnUnavailable.
func NewWebAuthn(issuer *url.URL, displayName string) (*WebAuthn, error) {
	host := issuer.Hostname()
	if host == "" || net.ParseIP(host) != nil {
		return nil, nil
	}
	rp, err := webauthn.New(&webauthn.Config{
		RPID:          host,
		RPDisplayName: displayName,
		RPOrigins:     []string{issuer.Scheme + "://" + issuer.Host},
		// "none": Gatehouse keeps no attestation trust list, so asking
		// for attestation would only cost users a privacy prompt.
		AttestationPreference: protocol.PreferNoAttestation,
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Enforce: true, Timeout: CeremonyTimeout, TimeoutUVD: CeremonyTimeout},
			Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: CeremonyTimeout, TimeoutUVD: CeremonyTimeout},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("users: WebAuthn relying party: %w", err)
	}
	return &WebAuthn{rp: rp}, nil
}

// ErrWebAuthnUnavailable is the answer of every WebAuthn call on an
// issuer whose host is an IP address.
func ErrWebAuthnUnavailable() error {
	return apierr.Precondition("USER-webauthn-unavailable",
		"security keys and passkeys need an issuer with a host name (localhost or a domain); WebAuthn does not accept an IP address")
}

func (w *WebAuthn) available() error {
	if w == nil || w.rp == nil {
		return ErrWebAuthnUnavailable()
	}
	return nil
}

// RPID is the relying party id ("" when unavailable).
func (w *WebAuthn) RPID() string {
	if w == nil || w.rp == nil {
		return ""
	}
	return w.rp.Config.RPID
}

// waUser is a user as go-webauthn sees it: the user handle is the user
// id, and creds are the credentials a ceremony may use.
type waUser struct {
	u     *User
	creds []webauthn.Credential
}

func (w waUser) WebAuthnID() []byte                         { return []byte(w.u.ID) }
func (w waUser) WebAuthnName() string                       { return w.u.LoginName() }
func (w waUser) WebAuthnCredentials() []webauthn.Credential { return w.creds }
func (w waUser) WebAuthnDisplayName() string {
	if w.u.DisplayName != "" {
		return w.u.DisplayName
	}
	return w.u.LoginName()
}

// isWebAuthn reports whether typ is a WebAuthn factor type.
func isWebAuthn(typ string) bool { return typ == FactorU2F || typ == FactorPasswordless }

// credentials are the ready WebAuthn credentials among fs of the types.
func credentials(fs []Factor, types ...string) ([]webauthn.Credential, error) {
	var out []webauthn.Credential
	for _, f := range fs {
		if !f.Ready() || !slices.Contains(types, f.Type) {
			continue
		}
		var c webauthn.Credential
		if err := json.Unmarshal([]byte(f.Credential), &c); err != nil {
			return nil, fmt.Errorf("users: stored credential %s: %w", f.ID, err)
		}
		out = append(out, c)
	}
	return out, nil
}

type webAuthnAdded struct {
	ID string `json:"id"`
	// Challenge is the ceremony's session data (the challenge the
	// browser signs, the options it was sent): no secret.
	Challenge string `json:"challenge"`
}

type webAuthnVerified struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	CredentialID []byte `json:"credentialId"`
	Credential   string `json:"credential"`
}

type signCount struct {
	ID         string `json:"id"`
	Credential string `json:"credential"`
}

func registerWebAuthn(es *eventstore.Store) {
	for typ, names := range webAuthnEvents {
		es.Register(names[0], func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
			var p webAuthnAdded
			if err := e.Unmarshal(&p); err != nil {
				return err
			}
			// A registration started again replaces the user's unfinished
			// one of the type.
			if _, err := tx.Exec(ctx, `DELETE FROM user_factors WHERE user_id = ? AND type = ? AND state = ?`,
				e.AggregateID, typ, FactorNotReady); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO user_factors (id, user_id, org_id, type, state, challenge, started_by, creation_date, change_date, sequence)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, p.ID, e.AggregateID, e.ResourceOwner, typ, FactorNotReady, p.Challenge, e.Editor,
				e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
				return err
			}
			return touch(ctx, tx, e)
		})
		es.Register(names[1], func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
			var p webAuthnVerified
			if err := e.Unmarshal(&p); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE user_factors SET state = ?, name = ?, credential_id = ?, credential = ?, challenge = '',
				change_date = ?, sequence = ? WHERE id = ?`, FactorReady, p.Name, p.CredentialID, p.Credential, e.CreatedAt, e.Sequence, p.ID); err != nil {
				return err
			}
			return touch(ctx, tx, e)
		})
		es.Register(names[2], func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
			var p signCount
			if err := e.Unmarshal(&p); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE user_factors SET credential = ? WHERE id = ?`, p.Credential, p.ID); err != nil {
				return err
			}
			return touch(ctx, tx, e)
		})
		es.Register(names[3], factorRemoved)
	}
}

// WebAuthnRegistration is a started registration: the factor's id and
// the PublicKeyCredentialCreationOptions for navigator.credentials.create
// (JSON, {"publicKey": {...}}).
type WebAuthnRegistration struct {
	ID      string
	Options json.RawMessage
}

// StartWebAuthn starts registering a security key (typ FactorU2F: any
// authenticator, no user verification asked) or a passkey
// (FactorPasswordless: a discoverable credential with user verification)
// for u. The user's credentials are excluded, so one authenticator is not
// registered twice. An unfinished registration of the type is replaced.
func (c *Commands) StartWebAuthn(ctx context.Context, editor string, u *User, wa *WebAuthn, typ string) (WebAuthnRegistration, []eventstore.Event, error) {
	if err := wa.available(); err != nil {
		return WebAuthnRegistration{}, nil, err
	}
	if err := human(u); err != nil {
		return WebAuthnRegistration{}, nil, err
	}
	fs, err := c.Q.Factors(ctx, u.ID)
	if err != nil {
		return WebAuthnRegistration{}, nil, err
	}
	existing, err := credentials(fs, FactorU2F, FactorPasswordless)
	if err != nil {
		return WebAuthnRegistration{}, nil, err
	}
	exclude := make([]protocol.CredentialDescriptor, 0, len(existing))
	for i := range existing {
		exclude = append(exclude, existing[i].Descriptor())
	}
	sel := protocol.AuthenticatorSelection{ResidentKey: protocol.ResidentKeyRequirementDiscouraged, UserVerification: protocol.VerificationDiscouraged}
	if typ == FactorPasswordless {
		sel = protocol.AuthenticatorSelection{ResidentKey: protocol.ResidentKeyRequirementRequired,
			RequireResidentKey: protocol.ResidentKeyRequired(), UserVerification: protocol.VerificationRequired}
	}
	creation, session, err := wa.rp.BeginRegistration(waUser{u: u}, webauthn.WithAuthenticatorSelection(sel), webauthn.WithExclusions(exclude))
	if err != nil {
		return WebAuthnRegistration{}, nil, fmt.Errorf("users: begin WebAuthn registration: %w", err)
	}
	opts, err := json.Marshal(creation)
	if err != nil {
		return WebAuthnRegistration{}, nil, err
	}
	sess, err := json.Marshal(session)
	if err != nil {
		return WebAuthnRegistration{}, nil, err
	}
	id := secrets.NewID()
	evs, err := c.push(ctx, editor, u, webAuthnEvents[typ][0], webAuthnAdded{ID: id, Challenge: string(sess)})
	if err != nil {
		return WebAuthnRegistration{}, nil, err
	}
	return WebAuthnRegistration{ID: id, Options: opts}, evs, nil
}

// webAuthnFactor returns u's factor id of type typ, or NotFound.
func (c *Commands) webAuthnFactor(ctx context.Context, u *User, typ, id string) (*Factor, []Factor, error) {
	fs, err := c.Q.Factors(ctx, u.ID)
	if err != nil {
		return nil, nil, err
	}
	for i := range fs {
		if fs[i].ID == id && fs[i].Type == typ {
			return &fs[i], fs, nil
		}
	}
	return nil, nil, apierr.NotFound("USER-webauthn-not-found", "the user has no such %s", factorNoun(typ))
}

func factorNoun(typ string) string {
	if typ == FactorPasswordless {
		return "passkey"
	}
	return "security key"
}

// VerifyWebAuthn completes registration id with the browser's
// PublicKeyCredential (JSON) and names the new factor. The response must
// answer the registration's challenge, within CeremonyTimeout, from the
// issuer's origin, for its RP ID (and with user verification for a
// passkey); anything else is InvalidArgument and changes nothing. A
// credential registered already (to anyone) is AlreadyExists.
func (c *Commands) VerifyWebAuthn(ctx context.Context, editor string, u *User, wa *WebAuthn, typ, id string, credential []byte, name string) ([]eventstore.Event, error) {
	if err := wa.available(); err != nil {
		return nil, err
	}
	if err := human(u); err != nil {
		return nil, err
	}
	f, fs, err := c.webAuthnFactor(ctx, u, typ, id)
	if err != nil {
		return nil, err
	}
	if f.Ready() || f.Challenge == "" {
		return nil, apierr.Precondition("USER-webauthn-verified", "this %s is registered already", factorNoun(typ))
	}
	var session webauthn.SessionData
	if err := json.Unmarshal([]byte(f.Challenge), &session); err != nil {
		return nil, fmt.Errorf("users: stored WebAuthn ceremony: %w", err)
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(credential)
	if err != nil {
		return nil, apierr.InvalidArgument("USER-webauthn-invalid", "the public key credential is not valid: %s", describe(err))
	}
	existing, err := credentials(fs, FactorU2F, FactorPasswordless)
	if err != nil {
		return nil, err
	}
	cred, err := wa.rp.CreateCredential(waUser{u: u, creds: existing}, session, parsed)
	if err != nil {
		return nil, apierr.InvalidArgument("USER-webauthn-invalid", "the public key credential is not valid: %s", describe(err))
	}
	var n int
	if err := c.Q.DB.Get(ctx, &n, `SELECT COUNT(*) FROM user_factors WHERE credential_id = ?`, cred.ID); err != nil {
		return nil, err
	}
	if n > 0 {
		return nil, apierr.AlreadyExists("USER-webauthn-exists", "this authenticator's credential is registered already")
	}
	rec, err := json.Marshal(cred)
	if err != nil {
		return nil, err
	}
	return c.push(ctx, editor, u, webAuthnEvents[typ][1], webAuthnVerified{ID: id, Name: name, CredentialID: cred.ID, Credential: string(rec)})
}

// describe is a go-webauthn error's reason for the caller (its details
// may hold internal state; the type and message do not).
func describe(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Details
	}
	return "malformed"
}

// RemoveWebAuthn removes u's factor id of type typ, ready or not.
// endSessions: see factorRef.
func (c *Commands) RemoveWebAuthn(ctx context.Context, editor string, u *User, typ, id string, endSessions bool) ([]eventstore.Event, error) {
	if err := human(u); err != nil {
		return nil, err
	}
	if _, _, err := c.webAuthnFactor(ctx, u, typ, id); err != nil {
		return nil, err
	}
	return c.push(ctx, editor, u, webAuthnEvents[typ][3], factorRef{ID: id, EndSessions: endSessions})
}

// BeginWebAuthnLogin starts a login ceremony bound to binding (a pending
// authorization request), replacing one started before for it: with u,
// an assertion by one of u's security keys or passkeys (a second
// factor); without, a passkey of anyone, with user verification (a
// passwordless sign-in). It returns the PublicKeyCredentialRequestOptions
// (JSON, {"publicKey": {...}}). A user without a WebAuthn factor is
// Precondition.
func (c *Commands) BeginWebAuthnLogin(ctx context.Context, wa *WebAuthn, binding string, u *User) (json.RawMessage, error) {
	if err := wa.available(); err != nil {
		return nil, err
	}
	var (
		assertion *protocol.CredentialAssertion
		session   *webauthn.SessionData
		err       error
		userID    string
	)
	if u == nil {
		assertion, session, err = wa.rp.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	} else {
		fs, ferr := c.Q.Factors(ctx, u.ID)
		if ferr != nil {
			return nil, ferr
		}
		creds, cerr := credentials(fs, FactorU2F, FactorPasswordless)
		if cerr != nil {
			return nil, cerr
		}
		if len(creds) == 0 {
			return nil, apierr.Precondition("USER-webauthn-none", "the user has no security key or passkey")
		}
		userID = u.ID
		assertion, session, err = wa.rp.BeginLogin(waUser{u: u, creds: creds}, webauthn.WithUserVerification(protocol.VerificationDiscouraged))
	}
	if err != nil {
		return nil, fmt.Errorf("users: begin WebAuthn login: %w", err)
	}
	opts, err := json.Marshal(assertion)
	if err != nil {
		return nil, err
	}
	sess, err := json.Marshal(session)
	if err != nil {
		return nil, err
	}
	if _, err := c.Q.DB.Exec(ctx, `DELETE FROM webauthn_challenges WHERE binding = ?`, binding); err != nil {
		return nil, err
	}
	if _, err := c.Q.DB.Exec(ctx, `INSERT INTO webauthn_challenges (binding, user_id, session, expires_at) VALUES (?, ?, ?, ?)`,
		binding, userID, string(sess), session.Expires); err != nil {
		if db.IsUniqueViolation(err) { // two starts racing: the other one stands
			return nil, apierr.Precondition("USER-webauthn-race", "another sign-in started meanwhile; try again")
		}
		return nil, err
	}
	return opts, nil
}

// takeChallenge removes and returns binding's login ceremony: each is
// used at most once, whatever the outcome. None is ErrBadCode.
func (c *Commands) takeChallenge(ctx context.Context, binding string) (userID string, session webauthn.SessionData, err error) {
	var row struct {
		UserID  string `db:"user_id"`
		Session string `db:"session"`
	}
	err = db.NotFound(c.Q.DB.Get(ctx, &row, `SELECT user_id, session FROM webauthn_challenges WHERE binding = ?`, binding))
	if errors.Is(err, db.ErrNotFound) {
		return "", session, ErrBadCode
	}
	if err != nil {
		return "", session, err
	}
	res, err := c.Q.DB.Exec(ctx, `DELETE FROM webauthn_challenges WHERE binding = ? AND session = ?`, binding, row.Session)
	if err != nil {
		return "", session, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return "", session, err
	} else if n != 1 {
		return "", session, ErrBadCode // taken by a concurrent check
	}
	if err := json.Unmarshal([]byte(row.Session), &session); err != nil {
		return "", session, fmt.Errorf("users: stored WebAuthn ceremony: %w", err)
	}
	return row.UserID, session, nil
}

// WebAuthnLogin is an accepted assertion: whose, by which factor.
type WebAuthnLogin struct {
	User   *User
	Factor Factor
	// UserVerified: the authenticator verified the user (PIN,
	// biometrics), as a passkey sign-in requires.
	UserVerified bool
}

// FinishWebAuthnLogin checks the browser's assertion (JSON) against the
// ceremony bound to binding, which it uses up: by userID's credential for
// a second factor, by anyone's passkey when userID is "". Everything the
// WebAuthn specification asks is checked: challenge, origin, RP ID, the
// signature by the credential's key, the user handle, user verification
// for a passkey sign-in, and the signature counter (a counter that does
// not grow is ErrCloned). A wrong, unknown, expired or used assertion is
// ErrBadCode.
func (c *Commands) FinishWebAuthnLogin(ctx context.Context, wa *WebAuthn, binding, userID string, assertion []byte) (WebAuthnLogin, error) {
	if err := wa.available(); err != nil {
		return WebAuthnLogin{}, err
	}
	bound, session, err := c.takeChallenge(ctx, binding)
	if err != nil {
		return WebAuthnLogin{}, err
	}
	if bound != userID {
		return WebAuthnLogin{}, ErrBadCode
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(assertion)
	if err != nil {
		return WebAuthnLogin{}, ErrBadCode
	}
	var (
		u    *User
		fs   []Factor
		cred *webauthn.Credential
	)
	load := func(id string, types ...string) (waUser, error) {
		usr, err := c.Q.Get(ctx, id)
		if err != nil {
			return waUser{}, err
		}
		if usr.Type != TypeHuman {
			return waUser{}, ErrBadCode
		}
		all, err := c.Q.Factors(ctx, id)
		if err != nil {
			return waUser{}, err
		}
		creds, err := credentials(all, types...)
		if err != nil {
			return waUser{}, err
		}
		u, fs = usr, all
		return waUser{u: usr, creds: creds}, nil
	}
	if userID != "" {
		wu, err := load(userID, FactorU2F, FactorPasswordless)
		if err != nil {
			return WebAuthnLogin{}, notFoundIsBad(err)
		}
		cred, err = wa.rp.ValidateLogin(wu, session, parsed)
		if err != nil {
			return WebAuthnLogin{}, ErrBadCode
		}
	} else {
		// Only passkeys sign in alone: a security key registered as a
		// second factor never replaces the password.
		var loadErr error
		_, cred, err = wa.rp.ValidatePasskeyLogin(func(_, handle []byte) (webauthn.User, error) {
			wu, err := load(string(handle), FactorPasswordless)
			loadErr = err
			return wu, err
		}, session, parsed)
		if loadErr != nil && !errors.Is(loadErr, db.ErrNotFound) && !errors.Is(loadErr, ErrBadCode) {
			return WebAuthnLogin{}, loadErr
		}
		if err != nil {
			return WebAuthnLogin{}, ErrBadCode
		}
	}
	var f *Factor
	for i := range fs {
		if isWebAuthn(fs[i].Type) && fs[i].Ready() && bytes.Equal(fs[i].CredentialID, cred.ID) {
			f = &fs[i]
		}
	}
	if f == nil {
		return WebAuthnLogin{}, ErrBadCode
	}
	if cred.Authenticator.CloneWarning {
		return WebAuthnLogin{}, ErrCloned
	}
	out := WebAuthnLogin{User: u, Factor: *f, UserVerified: parsed.Response.AuthenticatorData.Flags.HasUserVerified()}
	if cred.Authenticator.SignCount == 0 {
		return out, nil // an authenticator without a counter
	}
	rec, err := json.Marshal(cred)
	if err != nil {
		return WebAuthnLogin{}, err
	}
	// The new counter at the aggregate's version: of two logins racing
	// with one key, one is refused (a cloned key would race like this).
	_, err = c.ES.Push(ctx, u.ID, eventstore.Command{Aggregate: u.Aggregate(), Version: u.Version,
		Events: []eventstore.Pending{{Type: webAuthnEvents[f.Type][2], Payload: signCount{ID: f.ID, Credential: string(rec)}}}})
	if errors.Is(err, eventstore.ErrConcurrent) {
		return WebAuthnLogin{}, ErrBadCode
	}
	if err != nil {
		return WebAuthnLogin{}, err
	}
	return out, nil
}

func notFoundIsBad(err error) error {
	if errors.Is(err, db.ErrNotFound) {
		return ErrBadCode
	}
	return err
}

// PruneSteps delete login ceremonies past their expiry.
func PruneSteps() []db.PruneStep {
	return append([]db.PruneStep{{
		Table: "webauthn_challenges",
		Query: `DELETE FROM webauthn_challenges WHERE binding IN (SELECT binding FROM webauthn_challenges
			WHERE expires_at < ? LIMIT ` + db.Batch + `)`,
		Args: func(now time.Time) []any { return []any{now} },
	}}, codePruneSteps()...)
}
