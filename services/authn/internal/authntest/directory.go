package authntest

import (
	"context"
	"errors"
	"strings"
	"sync"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// User is a fake directory user.
type User struct {
	User           *directoryv1.User
	Password       string
	ChangeRequired bool
	// OTP, when set, gives the user an authenticator app whose one
	// accepted code it is (once: CheckAuthFactor spends it; set another
	// for the next login).
	OTP   string
	spent map[string]bool
}

// factors are u's ready second factors.
func (u *User) factors() []string {
	if u.OTP == "" {
		return nil
	}
	return []string{"otp"}
}

// Directory is a table-backed fake of the directory's internal API. It
// locks a user out after MaxFailures wrong passwords with
// ResourceExhausted (as directories before the progressive delay did; the
// login pages must answer it like a wrong password),
// answers a deactivated user's correct password with FailedPrecondition
// and records the client addresses of password checks.
type Directory struct {
	mu          sync.Mutex
	Clients     map[string]*directoryv1.Client
	Orgs        map[string]*directoryv1.GetOrgResponse
	Users       map[string]*User // by id
	MaxFailures int
	failures    map[string]int
	Addresses   []string // client_address of each VerifyPassword
	// Down makes every call fail with Unavailable.
	Down bool
	// OnGetUser, when set, runs at the start of every GetUser (to act
	// between a handler's reads).
	OnGetUser func()
	// SignedOut lists the users EndUserSessions signed out.
	SignedOut []string
	// ResetsRequested lists the login names of RequestPasswordReset;
	// ResetCodes holds each user's valid reset code (used up by
	// ResetPassword, which sets the password).
	ResetsRequested []string
	ResetCodes      map[string]string
	// EmailCodes and InitCodes hold each user's valid verification and
	// invitation code (used up by VerifyEmailCode and InitializeUser);
	// Verified lists the users VerifyEmailCode or InitializeUser verified.
	EmailCodes, InitCodes map[string]string
	Verified              []string
	// CodesSent lists the users SendEmailCode mailed.
	CodesSent []string
}

// NewDirectory returns an empty fake.
func NewDirectory() *Directory {
	return &Directory{Clients: map[string]*directoryv1.Client{}, Orgs: map[string]*directoryv1.GetOrgResponse{},
		Users: map[string]*User{}, MaxFailures: 3, failures: map[string]int{}}
}

func (d *Directory) down() error {
	if d.Down {
		return connect.NewError(connect.CodeUnavailable, errors.New("directory down"))
	}
	return nil
}

// GetClient implements the directory API.
func (d *Directory) GetClient(_ context.Context, r *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	c, ok := d.Clients[r.GetClientId()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("client not found"))
	}
	return &directoryv1.GetClientResponse{Client: c}, nil
}

// GetOrg implements the directory API.
func (d *Directory) GetOrg(_ context.Context, r *directoryv1.GetOrgRequest) (*directoryv1.GetOrgResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	o, ok := d.Orgs[r.GetOrgId()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("org not found"))
	}
	return o, nil
}

// GetUser implements the directory API.
func (d *Directory) GetUser(_ context.Context, r *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error) {
	if d.OnGetUser != nil {
		d.OnGetUser()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	u, ok := d.Users[r.GetUserId()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("user not found"))
	}
	return &directoryv1.GetUserResponse{User: u.User}, nil
}

// LookupUser implements the directory API.
func (d *Directory) LookupUser(_ context.Context, r *directoryv1.LookupUserRequest) (*directoryv1.LookupUserResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	u := d.find(r.GetOrgId(), "", r.GetLoginName())
	if u == nil {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("user not found"))
	}
	return &directoryv1.LookupUserResponse{User: u.User}, nil
}

func (d *Directory) find(orgID, userID, loginName string) *User {
	for _, u := range d.Users {
		if u.User.GetOrgId() != orgID {
			continue
		}
		if userID != "" && u.User.GetId() == userID {
			return u
		}
		if loginName != "" && (strings.EqualFold(u.User.GetUserName(), loginName) || strings.EqualFold(u.User.GetPreferredLoginName(), loginName)) {
			return u
		}
	}
	return nil
}

// VerifyPassword implements the directory API.
func (d *Directory) VerifyPassword(_ context.Context, r *directoryv1.VerifyPasswordRequest) (*directoryv1.VerifyPasswordResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	m := r
	d.Addresses = append(d.Addresses, m.GetClientAddress())
	u := d.find(m.GetOrgId(), m.GetUserId(), m.GetLoginName())
	if u == nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("wrong login name or password"))
	}
	if d.failures[u.User.GetId()] >= d.MaxFailures {
		return nil, connect.NewError(connect.CodeResourceExhausted, errors.New("locked"))
	}
	if m.GetPassword() != u.Password {
		d.failures[u.User.GetId()]++
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("wrong login name or password"))
	}
	d.failures[u.User.GetId()] = 0
	if u.User.GetState() == directoryv1.UserState_USER_STATE_INACTIVE {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("user deactivated"))
	}
	// As the directory does: the organization's login policy comes with
	// the answer.
	var lp *directoryv1.LoginPolicy
	if o, ok := d.Orgs[u.User.GetOrgId()]; ok {
		lp = o.GetLoginPolicy()
	}
	return &directoryv1.VerifyPasswordResponse{User: u.User, ChangeRequired: u.ChangeRequired, LoginPolicy: lp, SecondFactors: u.factors()}, nil
}

// ChangePassword implements the directory API.
func (d *Directory) ChangePassword(_ context.Context, r *directoryv1.ChangePasswordRequest) (*directoryv1.ChangePasswordResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	u, ok := d.Users[r.GetUserId()]
	if !ok || u.Password != r.GetCurrentPassword() {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("wrong password"))
	}
	if r.GetNewPassword() == u.Password {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the new password must differ"))
	}
	u.Password, u.ChangeRequired = r.GetNewPassword(), false
	return &directoryv1.ChangePasswordResponse{}, nil
}

// RegisterUser implements the directory API.
func (d *Directory) RegisterUser(_ context.Context, r *directoryv1.RegisterUserRequest) (*directoryv1.RegisterUserResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	m := r
	if d.find(m.GetOrgId(), "", m.GetUserName()) != nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("user name taken"))
	}
	org, ok := d.Orgs[m.GetOrgId()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("org not found"))
	}
	u := &directoryv1.User{Id: "u-" + m.GetUserName(), OrgId: m.GetOrgId(), UserName: m.GetUserName(),
		PreferredLoginName: m.GetUserName() + "@" + org.GetPrimaryDomain(), State: directoryv1.UserState_USER_STATE_ACTIVE,
		DisplayName: strings.TrimSpace(m.GetFirstName() + " " + m.GetLastName()), Email: m.GetEmail(), PreferredLanguage: m.GetPreferredLanguage()}
	d.Users[u.Id] = &User{User: u, Password: m.GetPassword()}
	return &directoryv1.RegisterUserResponse{User: u}, nil
}

// AddUser adds an active human user of org with a password.
func (d *Directory) AddUser(id, orgID, userName, password string) *User {
	d.mu.Lock()
	defer d.mu.Unlock()
	domain := orgID + ".example"
	if o, ok := d.Orgs[orgID]; ok {
		domain = o.GetPrimaryDomain()
	}
	u := &User{User: &directoryv1.User{Id: id, OrgId: orgID, UserName: userName, PreferredLoginName: userName + "@" + domain,
		State: directoryv1.UserState_USER_STATE_ACTIVE, DisplayName: strings.ToUpper(userName[:1]) + userName[1:]}, Password: password}
	d.Users[id] = u
	return u
}

// SetState changes a user's state.
func (d *Directory) SetState(id string, s directoryv1.UserState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Users[id].User.State = s
}

// GetIdP implements the directory API: this fake has no identity
// providers.
func (d *Directory) GetIdP(context.Context, *directoryv1.GetIdPRequest) (*directoryv1.GetIdPResponse, error) {
	return nil, connect.NewError(connect.CodeNotFound, errors.New("idp not found"))
}

// ListIdPs implements the directory API.
func (d *Directory) ListIdPs(context.Context, *directoryv1.ListIdPsRequest) (*directoryv1.ListIdPsResponse, error) {
	return &directoryv1.ListIdPsResponse{}, nil
}

// GetLinkedUser implements the directory API.
func (d *Directory) GetLinkedUser(context.Context, *directoryv1.GetLinkedUserRequest) (*directoryv1.GetLinkedUserResponse, error) {
	return nil, connect.NewError(connect.CodeNotFound, errors.New("not linked"))
}

// ConfirmLinkedEmail implements the directory API (nothing is linked).
func (d *Directory) ConfirmLinkedEmail(context.Context, *directoryv1.ConfirmLinkedEmailRequest) (*directoryv1.ConfirmLinkedEmailResponse, error) {
	return nil, connect.NewError(connect.CodeNotFound, errors.New("not linked"))
}

// RegisterExternalUser implements the directory API.
func (d *Directory) RegisterExternalUser(context.Context, *directoryv1.RegisterExternalUserRequest) (*directoryv1.RegisterExternalUserResponse, error) {
	return nil, connect.NewError(connect.CodeNotFound, errors.New("idp not found"))
}

// LinkExternalUser implements the directory API.
func (d *Directory) LinkExternalUser(context.Context, *directoryv1.LinkExternalUserRequest) (*directoryv1.LinkExternalUserResponse, error) {
	return nil, connect.NewError(connect.CodeNotFound, errors.New("idp not found"))
}

// SetOTP gives user id an authenticator app whose one accepted code is
// code (see User.OTP).
func (d *Directory) SetOTP(id, code string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Users[id].OTP = code
}

// ListAuthFactors implements the directory API: a user with an OTP has
// an authenticator app, the others no second factor.
func (d *Directory) ListAuthFactors(_ context.Context, r *directoryv1.ListAuthFactorsRequest) (*directoryv1.ListAuthFactorsResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	out := &directoryv1.ListAuthFactorsResponse{}
	if u, ok := d.Users[r.GetUserId()]; ok {
		out.SecondFactors = u.factors()
	}
	return out, nil
}

// CheckAuthFactor implements the directory API: a user's OTP is right
// once (TOTP codes only); every other code is wrong.
func (d *Directory) CheckAuthFactor(_ context.Context, r *directoryv1.CheckAuthFactorRequest) (*directoryv1.CheckAuthFactorResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	u, ok := d.Users[r.GetUserId()]
	if !ok || u.User.GetOrgId() != r.GetOrgId() {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("user not found"))
	}
	if r.GetType() != "otp" || u.OTP == "" || u.spent[u.OTP] || r.GetCode() != u.OTP {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("invalid code"))
	}
	if u.spent == nil {
		u.spent = map[string]bool{}
	}
	u.spent[u.OTP] = true
	return &directoryv1.CheckAuthFactorResponse{User: u.User}, nil
}

// StartTOTP implements the directory API: this fake enrolls no factor
// (the real directory's tests and the e2e suite cover enrollment).
func (d *Directory) StartTOTP(context.Context, *directoryv1.StartTOTPRequest) (*directoryv1.StartTOTPResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("the fake directory enrolls no factor"))
}

// VerifyTOTP implements the directory API (see StartTOTP).
func (d *Directory) VerifyTOTP(context.Context, *directoryv1.VerifyTOTPRequest) (*directoryv1.VerifyTOTPResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("the fake directory enrolls no factor"))
}

// GenerateRecoveryCodes implements the directory API (see StartTOTP).
func (d *Directory) GenerateRecoveryCodes(context.Context, *directoryv1.GenerateRecoveryCodesRequest) (*directoryv1.GenerateRecoveryCodesResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("the fake directory enrolls no factor"))
}

// errNoWebAuthn is the fake's answer to the WebAuthn calls: its issuer
// has no WebAuthn relying party (the real directory's tests and the e2e
// suite cover the ceremonies).
var errNoWebAuthn = connect.NewError(connect.CodeAborted, errors.New("the fake directory has no WebAuthn relying party"))

// StartWebAuthnLogin implements the directory API (see errNoWebAuthn).
func (d *Directory) StartWebAuthnLogin(context.Context, *directoryv1.StartWebAuthnLoginRequest) (*directoryv1.StartWebAuthnLoginResponse, error) {
	return nil, errNoWebAuthn
}

// CheckWebAuthnLogin implements the directory API: every assertion fails.
func (d *Directory) CheckWebAuthnLogin(context.Context, *directoryv1.CheckWebAuthnLoginRequest) (*directoryv1.CheckWebAuthnLoginResponse, error) {
	return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("invalid code"))
}

// StartWebAuthnRegistration implements the directory API (see errNoWebAuthn).
func (d *Directory) StartWebAuthnRegistration(context.Context, *directoryv1.StartWebAuthnRegistrationRequest) (*directoryv1.StartWebAuthnRegistrationResponse, error) {
	return nil, errNoWebAuthn
}

// VerifyWebAuthnRegistration implements the directory API (see errNoWebAuthn).
func (d *Directory) VerifyWebAuthnRegistration(context.Context, *directoryv1.VerifyWebAuthnRegistrationRequest) (*directoryv1.VerifyWebAuthnRegistrationResponse, error) {
	return nil, errNoWebAuthn
}

// GetAccount implements the directory API: this fake's users have no
// factor and no link.
func (d *Directory) GetAccount(context.Context, *directoryv1.GetAccountRequest) (*directoryv1.GetAccountResponse, error) {
	if err := d.down(); err != nil {
		return nil, err
	}
	return &directoryv1.GetAccountResponse{}, nil
}

// RemoveAccountFactor implements the directory API: there is none.
func (d *Directory) RemoveAccountFactor(context.Context, *directoryv1.RemoveAccountFactorRequest) (*directoryv1.RemoveAccountFactorResponse, error) {
	return nil, connect.NewError(connect.CodeNotFound, errors.New("no such factor"))
}

// UnlinkAccount implements the directory API: there is no link.
func (d *Directory) UnlinkAccount(context.Context, *directoryv1.UnlinkAccountRequest) (*directoryv1.UnlinkAccountResponse, error) {
	return nil, connect.NewError(connect.CodeNotFound, errors.New("link not found"))
}

// EndUserSessions implements the directory API: it counts the calls.
func (d *Directory) EndUserSessions(_ context.Context, req *directoryv1.EndUserSessionsRequest) (*directoryv1.EndUserSessionsResponse, error) {
	if err := d.down(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.SignedOut = append(d.SignedOut, req.GetUserId())
	return &directoryv1.EndUserSessionsResponse{}, nil
}

// RequestPasswordReset implements the directory API: it records the name.
func (d *Directory) RequestPasswordReset(_ context.Context, r *directoryv1.RequestPasswordResetRequest) (*directoryv1.RequestPasswordResetResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	d.ResetsRequested = append(d.ResetsRequested, r.GetLoginName())
	return &directoryv1.RequestPasswordResetResponse{}, nil
}

// resetUser is the user of a valid reset code (call with d.mu held).
func (d *Directory) resetUser(userID, code string) (*User, error) {
	if err := d.down(); err != nil {
		return nil, err
	}
	u, ok := d.Users[userID]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("user not found"))
	}
	if want, ok := d.ResetCodes[userID]; !ok || want != code {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the verification code is not valid"))
	}
	return u, nil
}

// CheckPasswordResetCode implements the directory API.
func (d *Directory) CheckPasswordResetCode(_ context.Context, r *directoryv1.CheckPasswordResetCodeRequest) (*directoryv1.CheckPasswordResetCodeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.resetUser(r.GetUserId(), r.GetCode())
	if err != nil {
		return nil, err
	}
	return &directoryv1.CheckPasswordResetCodeResponse{User: u.User}, nil
}

// ResetPassword implements the directory API: it sets the password and
// uses the code up.
func (d *Directory) ResetPassword(_ context.Context, r *directoryv1.ResetPasswordRequest) (*directoryv1.ResetPasswordResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.resetUser(r.GetUserId(), r.GetCode())
	if err != nil {
		return nil, err
	}
	u.Password = r.GetPassword()
	delete(d.ResetCodes, r.GetUserId())
	return &directoryv1.ResetPasswordResponse{User: u.User}, nil
}

// codes is the map of valid codes of kind (call with d.mu held).
func (d *Directory) codes(kind directoryv1.UserCodeKind) map[string]string {
	if d.EmailCodes == nil {
		d.EmailCodes, d.InitCodes = map[string]string{}, map[string]string{}
	}
	if kind == directoryv1.UserCodeKind_USER_CODE_KIND_INIT {
		return d.InitCodes
	}
	return d.EmailCodes
}

// codeUser is the user of a valid code of kind (call with d.mu held).
func (d *Directory) codeUser(userID, code string, kind directoryv1.UserCodeKind) (*User, error) {
	if err := d.down(); err != nil {
		return nil, err
	}
	u, ok := d.Users[userID]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("user not found"))
	}
	if want, ok := d.codes(kind)[userID]; !ok || want != code {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the verification code is not valid"))
	}
	return u, nil
}

// CheckUserCode implements the directory API.
func (d *Directory) CheckUserCode(_ context.Context, r *directoryv1.CheckUserCodeRequest) (*directoryv1.CheckUserCodeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.codeUser(r.GetUserId(), r.GetCode(), r.GetKind())
	if err != nil {
		return nil, err
	}
	return &directoryv1.CheckUserCodeResponse{User: u.User}, nil
}

// VerifyEmailCode implements the directory API: it records the user and
// uses the code up.
func (d *Directory) VerifyEmailCode(_ context.Context, r *directoryv1.VerifyEmailCodeRequest) (*directoryv1.VerifyEmailCodeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.codeUser(r.GetUserId(), r.GetCode(), directoryv1.UserCodeKind_USER_CODE_KIND_EMAIL)
	if err != nil {
		return nil, err
	}
	delete(d.EmailCodes, r.GetUserId())
	d.Verified = append(d.Verified, r.GetUserId())
	u.User.EmailVerified = true
	return &directoryv1.VerifyEmailCodeResponse{User: u.User}, nil
}

// InitializeUser implements the directory API: it sets the password,
// records the user verified and uses the code up.
func (d *Directory) InitializeUser(_ context.Context, r *directoryv1.InitializeUserRequest) (*directoryv1.InitializeUserResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.codeUser(r.GetUserId(), r.GetCode(), directoryv1.UserCodeKind_USER_CODE_KIND_INIT)
	if err != nil {
		return nil, err
	}
	u.Password = r.GetPassword()
	delete(d.InitCodes, r.GetUserId())
	d.Verified = append(d.Verified, r.GetUserId())
	return &directoryv1.InitializeUserResponse{}, nil
}

// SendEmailCode implements the directory API: it records the user.
func (d *Directory) SendEmailCode(_ context.Context, r *directoryv1.SendEmailCodeRequest) (*directoryv1.SendEmailCodeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(); err != nil {
		return nil, err
	}
	d.CodesSent = append(d.CodesSent, r.GetUserId())
	return &directoryv1.SendEmailCodeResponse{}, nil
}
