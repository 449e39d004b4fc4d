package management_test

//lint:file-ignore SA1019 the deprecated OIDC provider RPCs are part of the interface (ZITADEL compatibility); this file calls them on purpose.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/pquerna/otp/totp"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	mv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/webauthntest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// mxInvoker calls one RPC on a typed client with an untyped request.
type mxInvoker func(ctx context.Context, c managementv1connect.ManagementServiceClient, req proto.Message) (proto.Message, error)

// mxRPC adapts a client method expression, e.g.
// managementv1connect.ManagementServiceClient.AddOrg, to an mxInvoker.
func mxRPC[Req, Res any, PReq interface {
	*Req
	proto.Message
}, PRes interface {
	*Res
	proto.Message
}](m func(managementv1connect.ManagementServiceClient, context.Context, *Req) (*Res, error)) mxInvoker {
	return func(ctx context.Context, c managementv1connect.ManagementServiceClient, req proto.Message) (proto.Message, error) {
		typed, ok := req.(PReq)
		if !ok {
			return nil, fmt.Errorf("request %T does not match the method's %T", req, PReq(nil))
		}
		res, err := m(c, ctx, (*Req)(typed))
		if err != nil {
			return nil, err
		}
		return PRes(res), nil
	}
}

// mxKind says how a response's details relate to the events.
type mxKind int

const (
	// mxWrite: details of the event the call added (sequence, both dates,
	// owner), which is the aggregate's last event.
	mxWrite mxKind = iota
	// mxRead: the object carried by the response has its first event's
	// date and the aggregate's last event's sequence and date.
	mxRead
	// mxList: ListDetails name the aggregate's last event (the last one
	// reduced), and the object is among the results with read details.
	mxList
	// mxListBare: ListDetails as mxList; the results carry no details of
	// their own (ZITADEL's IDPUserLink).
	mxListBare
	// mxNoDetails: the response carries no details at all (ZITADEL's
	// ListHumanAuthFactorsResponse).
	mxNoDetails
)

// mxRow is one RPC of the matrix: a valid request (built from the objects
// earlier rows created) and where the response's details come from.
type mxRow struct {
	rpc  string // method name in ManagementService
	http string // "VERB path" of its google.api.http annotation (the table)
	call mxInvoker
	req  func(s *mxRun) proto.Message
	kind mxKind
	agg  string // object (key of mxRun.ids) whose aggregate the call changes or reads
	obj  string // mxRead/mxList: the object the response carries; "" = agg itself
	// owner names the organization owning agg when it is not the target
	// ("" = the target): a granted organization acts on the granting
	// organization's project.
	owner string
	// born records the aggregate's last event after the call as the
	// creation event of this object (for objects inside an aggregate).
	born string
	// after captures ids from the response and checks what it carries
	// beyond the details.
	after func(t *testing.T, s *mxRun, res proto.Message)
}

// mxRun is the state of one protocol's pass over the matrix.
type mxRun struct {
	e     *mgmttest.Env
	proto string
	ids   map[string]string
	born  map[string]eventstore.Event
}

// ageMail moves every queued message a throttle's length into the past,
// as if the minute between two messages of a kind had passed.
func (s *mxRun) ageMail() {
	if _, err := s.e.DB.Exec(context.Background(), `UPDATE mail_outbox SET created_at = ?`,
		time.Now().Add(-2*mail.Throttle)); err != nil {
		panic(err)
	}
}

func (s *mxRun) id(t *testing.T, name string) string {
	t.Helper()
	v, ok := s.ids[name]
	if !ok {
		t.Fatalf("no %s yet: an earlier row did not create it", name)
	}
	return v
}

// mxTable lists every ManagementService RPC in an order in which each row's
// prerequisites exist. Reads directly follow the last write on what they
// read, so their details can be compared with the aggregate's last event.
func mxTable() []mxRow {
	type M = managementv1connect.ManagementServiceClient
	return []mxRow{
		{rpc: "AddOrg", http: "POST /management/v1/orgs", call: mxRPC(M.AddOrg), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.AddOrgRequest{Name: "Matrix " + s.proto} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				s.ids["org"] = res.(*mv1.AddOrgResponse).GetId()
			}},
		{rpc: "GetMyOrg", http: "GET /management/v1/orgs/me", call: mxRPC(M.GetMyOrg), kind: mxRead, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.GetMyOrgRequest{} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				o := res.(*mv1.GetMyOrgResponse).GetOrg()
				if o.GetName() != "Matrix "+s.proto || o.GetState() != mv1.OrgState_ORG_STATE_ACTIVE || o.GetPrimaryDomain() == "" {
					t.Fatalf("org = %v; want the active org %q with a primary domain", o, "Matrix "+s.proto)
				}
				s.ids["domain"] = o.GetPrimaryDomain()
			}},
		{rpc: "ListOrgs", http: "POST /management/v1/orgs/_search", call: mxRPC(M.ListOrgs), kind: mxList, agg: "org",
			req: func(s *mxRun) proto.Message {
				return &mv1.ListOrgsRequest{Queries: []*mv1.OrgQuery{{Query: &mv1.OrgQuery_NameQuery{
					NameQuery: &mv1.OrgNameQuery{Name: "matrix " + s.proto, Method: mv1.TextQueryMethod_TEXT_QUERY_METHOD_EQUALS_IGNORE_CASE}}}}}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListOrgsResponse)
				if r.GetDetails().GetTotalResult() != 1 || len(r.GetResult()) != 1 || r.GetResult()[0].GetPrimaryDomain() != s.ids["domain"] {
					t.Fatalf("orgs = %v; want the matrix organization only", r)
				}
			}},
		{rpc: "AddOrgDomain", http: "POST /management/v1/orgs/me/domains", call: mxRPC(M.AddOrgDomain), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message {
				s.ids["ownDomain"] = "matrix-" + strings.ToLower(strings.ReplaceAll(s.proto, "-", "")) + ".example"
				return &mv1.AddOrgDomainRequest{Domain: s.ids["ownDomain"]}
			}},
		{rpc: "GenerateOrgDomainValidation", http: "POST /management/v1/orgs/me/domains/{domain}/validation/_generate",
			call: mxRPC(M.GenerateOrgDomainValidation), kind: mxNoDetails, agg: "org",
			req: func(s *mxRun) proto.Message {
				return &mv1.GenerateOrgDomainValidationRequest{Domain: s.ids["ownDomain"], Type: mv1.DomainValidationType_DOMAIN_VALIDATION_TYPE_DNS}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.GenerateOrgDomainValidationResponse)
				if len(r.GetToken()) < 20 || r.GetUrl() != "_gatehouse-challenge."+s.ids["ownDomain"] {
					t.Fatalf("validation = %v", r)
				}
				s.e.DNS.Set(r.GetUrl(), r.GetToken())
			}},
		{rpc: "ValidateOrgDomain", http: "POST /management/v1/orgs/me/domains/{domain}/validation/_validate",
			call: mxRPC(M.ValidateOrgDomain), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.ValidateOrgDomainRequest{Domain: s.ids["ownDomain"]} }},
		{rpc: "SetPrimaryOrgDomain", http: "POST /management/v1/orgs/me/domains/{domain}/_set_primary",
			call: mxRPC(M.SetPrimaryOrgDomain), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.SetPrimaryOrgDomainRequest{Domain: s.ids["ownDomain"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				s.ids["generated"], s.ids["domain"] = s.ids["domain"], s.ids["ownDomain"]
			}},
		{rpc: "RemoveOrgDomain", http: "DELETE /management/v1/orgs/me/domains/{domain}", call: mxRPC(M.RemoveOrgDomain), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.RemoveOrgDomainRequest{Domain: s.ids["generated"]} }},
		{rpc: "ListOrgDomains", http: "POST /management/v1/orgs/me/domains/_search", call: mxRPC(M.ListOrgDomains), kind: mxListBare, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.ListOrgDomainsRequest{} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListOrgDomainsResponse).GetResult()
				if len(r) != 1 || r[0].GetDomainName() != s.ids["ownDomain"] || !r[0].GetIsVerified() || !r[0].GetIsPrimary() ||
					r[0].GetValidationType() != mv1.DomainValidationType_DOMAIN_VALIDATION_TYPE_DNS || r[0].GetOrgId() != s.ids["org"] {
					t.Fatalf("domains = %v; want the verified primary %s only", r, s.ids["ownDomain"])
				}
			}},
		{rpc: "AddCustomLoginPolicy", http: "POST /management/v1/policies/login", call: mxRPC(M.AddCustomLoginPolicy), kind: mxWrite, agg: "org", born: "policy",
			req: func(s *mxRun) proto.Message {
				s.ids["policy"] = "" // a policy has no id of its own
				return &mv1.AddCustomLoginPolicyRequest{AllowUsernamePassword: true, AllowRegister: true,
					PasswordCheckLifetime: durationpb.New(time.Hour), SecondFactors: []mv1.SecondFactorType{mv1.SecondFactorType_SECOND_FACTOR_TYPE_OTP}}
			}},
		{rpc: "UpdateCustomLoginPolicy", http: "PUT /management/v1/policies/login", call: mxRPC(M.UpdateCustomLoginPolicy), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message {
				return &mv1.UpdateCustomLoginPolicyRequest{AllowUsernamePassword: true, AllowRegister: true, IgnoreUnknownUsernames: true,
					PasswordCheckLifetime: durationpb.New(2 * time.Hour)}
			}},
		{rpc: "GetLoginPolicy", http: "GET /management/v1/policies/login", call: mxRPC(M.GetLoginPolicy), kind: mxRead, agg: "org", obj: "policy",
			req: func(s *mxRun) proto.Message { return &mv1.GetLoginPolicyRequest{} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.GetLoginPolicyResponse)
				p := r.GetPolicy()
				if r.GetIsDefault() || p.GetIsDefault() || !p.GetAllowRegister() || !p.GetIgnoreUnknownUsernames() ||
					p.GetPasswordCheckLifetime().AsDuration() != 2*time.Hour || len(p.GetSecondFactors()) != 1 {
					t.Fatalf("policy = %v; want the updated custom policy with the added factor kept", r)
				}
			}},
		{rpc: "AddSecondFactorToLoginPolicy", http: "POST /management/v1/policies/login/second_factors", call: mxRPC(M.AddSecondFactorToLoginPolicy), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddSecondFactorToLoginPolicyRequest{Type: mv1.SecondFactorType_SECOND_FACTOR_TYPE_U2F}
			}},
		{rpc: "ListLoginPolicySecondFactors", http: "POST /management/v1/policies/login/second_factors/_search", call: mxRPC(M.ListLoginPolicySecondFactors), kind: mxListBare, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.ListLoginPolicySecondFactorsRequest{} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListLoginPolicySecondFactorsResponse)
				if !slices.Equal(r.GetResult(), []mv1.SecondFactorType{mv1.SecondFactorType_SECOND_FACTOR_TYPE_OTP, mv1.SecondFactorType_SECOND_FACTOR_TYPE_U2F}) ||
					r.GetDetails().GetTotalResult() != 2 {
					t.Fatalf("second factors = %v; want OTP and U2F", r)
				}
			}},
		{rpc: "RemoveSecondFactorFromLoginPolicy", http: "DELETE /management/v1/policies/login/second_factors/{type}", call: mxRPC(M.RemoveSecondFactorFromLoginPolicy), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message {
				return &mv1.RemoveSecondFactorFromLoginPolicyRequest{Type: mv1.SecondFactorType_SECOND_FACTOR_TYPE_U2F}
			}},
		{rpc: "AddMultiFactorToLoginPolicy", http: "POST /management/v1/policies/login/multi_factors", call: mxRPC(M.AddMultiFactorToLoginPolicy), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddMultiFactorToLoginPolicyRequest{Type: mv1.MultiFactorType_MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION}
			}},
		{rpc: "ListLoginPolicyMultiFactors", http: "POST /management/v1/policies/login/multi_factors/_search", call: mxRPC(M.ListLoginPolicyMultiFactors), kind: mxListBare, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.ListLoginPolicyMultiFactorsRequest{} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if r := res.(*mv1.ListLoginPolicyMultiFactorsResponse).GetResult(); len(r) != 1 {
					t.Fatalf("multi factors = %v; want U2F with verification", r)
				}
			}},
		{rpc: "RemoveMultiFactorFromLoginPolicy", http: "DELETE /management/v1/policies/login/multi_factors/{type}", call: mxRPC(M.RemoveMultiFactorFromLoginPolicy), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message {
				return &mv1.RemoveMultiFactorFromLoginPolicyRequest{Type: mv1.MultiFactorType_MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION}
			}},
		{rpc: "ResetLoginPolicyToDefault", http: "DELETE /management/v1/policies/login", call: mxRPC(M.ResetLoginPolicyToDefault), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.ResetLoginPolicyToDefaultRequest{} }},
		{rpc: "AddHumanUser", http: "POST /management/v1/users/human", call: mxRPC(M.AddHumanUser), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddHumanUserRequest{
					UserName:        "ada",
					Profile:         &mv1.AddHumanUserRequest_Profile{FirstName: "Ada", LastName: "Lovelace", PreferredLanguage: "en"},
					Email:           &mv1.AddHumanUserRequest_Email{Email: "ada@example.com", IsEmailVerified: true},
					Phone:           &mv1.AddHumanUserRequest_Phone{Phone: "+41790000000"},
					InitialPassword: "Initial-Passw0rd",
				}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				s.ids["ada"] = res.(*mv1.AddHumanUserResponse).GetUserId()
			}},
		{rpc: "GetUserByID", http: "GET /management/v1/users/{id}", call: mxRPC(M.GetUserByID), kind: mxRead, agg: "ada",
			req: func(s *mxRun) proto.Message { return &mv1.GetUserByIDRequest{Id: s.ids["ada"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				u := res.(*mv1.GetUserByIDResponse).GetUser()
				if u.GetUserName() != "ada" || u.GetHuman().GetEmail().GetEmail() != "ada@example.com" ||
					!strings.HasPrefix(u.GetPreferredLoginName(), "ada@") || u.GetState() != mv1.UserState_USER_STATE_ACTIVE {
					t.Fatalf("user = %v; want active human ada", u)
				}
			}},
		{rpc: "ListUsers", http: "POST /management/v1/users/_search", call: mxRPC(M.ListUsers), kind: mxList, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.ListUsersRequest{Queries: []*mv1.UserQuery{{Query: &mv1.UserQuery_UserNameQuery{
					UserNameQuery: &mv1.UserNameQuery{UserName: "ada"}}}}}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if n := res.(*mv1.ListUsersResponse).GetDetails().GetTotalResult(); n != 1 {
					t.Fatalf("total %d; want 1", n)
				}
			}},
		{rpc: "ImportHumanUser", http: "POST /management/v1/users/human/_import", call: mxRPC(M.ImportHumanUser), kind: mxWrite, agg: "grace",
			req: func(s *mxRun) proto.Message {
				return &mv1.ImportHumanUserRequest{
					UserName: "grace",
					Profile:  &mv1.ImportHumanUserRequest_Profile{FirstName: "Grace", LastName: "Hopper"},
					Email:    &mv1.ImportHumanUserRequest_Email{Email: "grace@example.com"},
					Password: "Imported-Passw0rd",
				}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				s.ids["grace"] = res.(*mv1.ImportHumanUserResponse).GetUserId()
			}},
		{rpc: "SetHumanPassword", http: "POST /management/v1/users/{user_id}/password", call: mxRPC(M.SetHumanPassword), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.SetHumanPasswordRequest{UserId: s.ids["ada"], Password: "Changed-Passw0rd", NoChangeRequired: true}
			}},
		{rpc: "SendHumanResetPasswordNotification", http: "POST /management/v1/users/{user_id}/password/_reset",
			call: mxRPC(M.SendHumanResetPasswordNotification), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.SendHumanResetPasswordNotificationRequest{UserId: s.ids["ada"]}
			}},
		{rpc: "PasswordReset", http: "POST /v2/users/{user_id}/password_reset", call: mxRPC(M.PasswordReset), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.PasswordResetRequest{UserId: s.ids["ada"], Medium: &mv1.PasswordResetRequest_ReturnCode{ReturnCode: &mv1.ReturnPasswordResetCode{}}}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if s.ids["resetCode"] = res.(*mv1.PasswordResetResponse).GetVerificationCode(); len(s.ids["resetCode"]) < 20 {
					t.Fatalf("return_code gave %q", s.ids["resetCode"])
				}
			}},
		{rpc: "SetPassword", http: "POST /v2/users/{user_id}/password", call: mxRPC(M.SetPassword), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.SetPasswordRequest{UserId: s.ids["ada"], NewPassword: &mv1.Password{Password: "Reset-Passw0rd-1"},
					Verification: &mv1.SetPasswordRequest_VerificationCode{VerificationCode: s.ids["resetCode"]}}
			}},
		{rpc: "UpdateHumanEmail", http: "PUT /management/v1/users/{user_id}/email", call: mxRPC(M.UpdateHumanEmail), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.UpdateHumanEmailRequest{UserId: s.ids["ada"], Email: "ada@lovelace.example"}
			}},
		{rpc: "ResendHumanEmailVerification", http: "POST /management/v1/users/{user_id}/email/_resend_verification",
			call: mxRPC(M.ResendHumanEmailVerification), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				s.ageMail() // past the minute since UpdateHumanEmail's mail
				return &mv1.ResendHumanEmailVerificationRequest{UserId: s.ids["ada"]}
			}},
		{rpc: "SetEmail", http: "POST /v2/users/{user_id}/email", call: mxRPC(M.SetEmail), kind: mxWrite, agg: "grace",
			req: func(s *mxRun) proto.Message {
				return &mv1.SetEmailRequest{UserId: s.ids["grace"], Email: "grace.hopper@example.com",
					Verification: &mv1.SetEmailRequest_ReturnCode{ReturnCode: &mv1.ReturnEmailVerificationCode{}}}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if len(res.(*mv1.SetEmailResponse).GetVerificationCode()) < 20 {
					t.Fatalf("return_code gave %v", res)
				}
			}},
		{rpc: "ResendEmailCode", http: "POST /v2/users/{user_id}/email/resend", call: mxRPC(M.ResendEmailCode), kind: mxWrite, agg: "grace",
			req: func(s *mxRun) proto.Message {
				return &mv1.ResendEmailCodeRequest{UserId: s.ids["grace"],
					Verification: &mv1.ResendEmailCodeRequest_ReturnCode{ReturnCode: &mv1.ReturnEmailVerificationCode{}}}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if s.ids["emailCode"] = res.(*mv1.ResendEmailCodeResponse).GetVerificationCode(); len(s.ids["emailCode"]) < 20 {
					t.Fatalf("return_code gave %v", res)
				}
			}},
		{rpc: "VerifyEmail", http: "POST /v2/users/{user_id}/email/verify", call: mxRPC(M.VerifyEmail), kind: mxWrite, agg: "grace",
			req: func(s *mxRun) proto.Message {
				return &mv1.VerifyEmailRequest{UserId: s.ids["grace"], VerificationCode: s.ids["emailCode"]}
			}},
		{rpc: "ResendHumanInitialization", http: "POST /management/v1/users/{user_id}/_resend_initialization",
			call: mxRPC(M.ResendHumanInitialization), kind: mxWrite, agg: "ida",
			req: func(s *mxRun) proto.Message {
				if _, ok := s.ids["ida"]; !ok { // (the authorization matrix names its own user)
					r := s.e.REST("POST", "/management/v1/users/human", s.e.AdminToken, s.ids["org"], map[string]any{"userName": "ida",
						"profile": map[string]any{"firstName": "Ida", "lastName": "Rhodes"}, "email": map[string]any{"email": "ida@example.com"}})
					s.ids["ida"], _ = r.JSON["userId"].(string)
				}
				s.ageMail() // past the minute since the first invitation
				return &mv1.ResendHumanInitializationRequest{UserId: s.ids["ida"], Email: "ida.rhodes@example.com"}
			}},
		{rpc: "DeactivateUser", http: "POST /management/v1/users/{id}/_deactivate", call: mxRPC(M.DeactivateUser), kind: mxWrite, agg: "grace",
			req: func(s *mxRun) proto.Message { return &mv1.DeactivateUserRequest{Id: s.ids["grace"]} }},
		{rpc: "ReactivateUser", http: "POST /management/v1/users/{id}/_reactivate", call: mxRPC(M.ReactivateUser), kind: mxWrite, agg: "grace",
			req: func(s *mxRun) proto.Message { return &mv1.ReactivateUserRequest{Id: s.ids["grace"]} }},
		{rpc: "UnlockUser", http: "POST /management/v1/users/{id}/_unlock", call: mxRPC(M.UnlockUser), kind: mxWrite, agg: "grace",
			req: func(s *mxRun) proto.Message { return &mv1.UnlockUserRequest{Id: s.ids["grace"]} }},
		{rpc: "AddOrgMember", http: "POST /management/v1/orgs/me/members", call: mxRPC(M.AddOrgMember), kind: mxWrite, agg: "org", born: "member",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddOrgMemberRequest{UserId: s.ids["ada"], Roles: []string{"ORG_USER_MANAGER"}}
			}},
		{rpc: "ListOrgMembers", http: "POST /management/v1/orgs/me/members/_search", call: mxRPC(M.ListOrgMembers), kind: mxList, agg: "org", obj: "member",
			req: func(s *mxRun) proto.Message {
				s.ids["member"] = s.ids["ada"]
				return &mv1.ListOrgMembersRequest{Queries: []*mv1.MemberQuery{{Query: &mv1.MemberQuery_EmailQuery{
					EmailQuery: &mv1.MemberEmailQuery{Email: "ADA@", Method: mv1.TextQueryMethod_TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE}}}}}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListOrgMembersResponse)
				if r.GetDetails().GetTotalResult() != 1 || len(r.GetResult()) != 1 {
					t.Fatalf("members = %v; want ada only", r)
				}
				m := r.GetResult()[0]
				if m.GetUserId() != s.ids["ada"] || len(m.GetRoles()) != 1 || m.GetRoles()[0] != "ORG_USER_MANAGER" ||
					!strings.HasPrefix(m.GetPreferredLoginName(), "ada@") || m.GetUserType() != mv1.Type_TYPE_HUMAN ||
					m.GetFirstName() != "Ada" || m.GetUserResourceOwner() != s.ids["org"] {
					t.Fatalf("member = %v; want ada, ORG_USER_MANAGER", m)
				}
			}},
		{rpc: "RemoveOrgMember", http: "DELETE /management/v1/orgs/me/members/{user_id}", call: mxRPC(M.RemoveOrgMember), kind: mxWrite, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.RemoveOrgMemberRequest{UserId: s.ids["ada"]} }},
		{rpc: "RemoveUser", http: "DELETE /management/v1/users/{id}", call: mxRPC(M.RemoveUser), kind: mxWrite, agg: "grace",
			req: func(s *mxRun) proto.Message { return &mv1.RemoveUserRequest{Id: s.ids["grace"]} }},
		{rpc: "AddMachineUser", http: "POST /management/v1/users/machine", call: mxRPC(M.AddMachineUser), kind: mxWrite, agg: "robot",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddMachineUserRequest{UserName: "robot-" + s.proto, Name: "Robot", Description: "matrix test",
					AccessTokenType: mv1.AccessTokenType_ACCESS_TOKEN_TYPE_JWT}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				s.ids["robot"] = res.(*mv1.AddMachineUserResponse).GetUserId()
			}},
		{rpc: "AddMachineKey", http: "POST /management/v1/users/{user_id}/keys", call: mxRPC(M.AddMachineKey), kind: mxWrite, agg: "robot", born: "robotKey",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddMachineKeyRequest{UserId: s.ids["robot"], Type: mv1.KeyType_KEY_TYPE_JSON}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.AddMachineKeyResponse)
				s.ids["robotKey"] = r.GetKeyId()
				mxKeyFile(t, r.GetKeyDetails(), map[string]string{"type": "serviceaccount", "keyId": r.GetKeyId(), "userId": s.ids["robot"]})
			}},
		{rpc: "ListMachineKeys", http: "POST /management/v1/users/{user_id}/keys/_search", call: mxRPC(M.ListMachineKeys), kind: mxList, agg: "robot", obj: "robotKey",
			req: func(s *mxRun) proto.Message { return &mv1.ListMachineKeysRequest{UserId: s.ids["robot"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if n := res.(*mv1.ListMachineKeysResponse).GetDetails().GetTotalResult(); n != 1 {
					t.Fatalf("total %d; want 1", n)
				}
			}},
		{rpc: "RemoveMachineKey", http: "DELETE /management/v1/users/{user_id}/keys/{key_id}", call: mxRPC(M.RemoveMachineKey), kind: mxWrite, agg: "robot",
			req: func(s *mxRun) proto.Message {
				return &mv1.RemoveMachineKeyRequest{UserId: s.ids["robot"], KeyId: s.ids["robotKey"]}
			}},
		{rpc: "GenerateMachineSecret", http: "PUT /management/v1/users/{user_id}/secret", call: mxRPC(M.GenerateMachineSecret), kind: mxWrite, agg: "robot",
			req: func(s *mxRun) proto.Message { return &mv1.GenerateMachineSecretRequest{UserId: s.ids["robot"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.GenerateMachineSecretResponse)
				// The client id is the login name (user names are unique
				// only per organization), not the bare user name.
				want := "robot-" + s.proto + "@" + s.ids["domain"]
				if r.GetClientId() != want || len(r.GetClientSecret()) < 20 {
					t.Fatalf("client id %q, secret of %d characters; want %s and a long secret", r.GetClientId(), len(r.GetClientSecret()), want)
				}
			}},
		{rpc: "RemoveMachineSecret", http: "DELETE /management/v1/users/{user_id}/secret", call: mxRPC(M.RemoveMachineSecret), kind: mxWrite, agg: "robot",
			req: func(s *mxRun) proto.Message { return &mv1.RemoveMachineSecretRequest{UserId: s.ids["robot"]} }},
		{rpc: "SetUserMetadata", http: "POST /management/v1/users/{id}/metadata/{key}", call: mxRPC(M.SetUserMetadata), kind: mxWrite, agg: "ada", born: "k1",
			req: func(s *mxRun) proto.Message {
				return &mv1.SetUserMetadataRequest{Id: s.ids["ada"], Key: "k1", Value: []byte("v1")}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if id := res.(*mv1.SetUserMetadataResponse).GetId(); id != s.ids["ada"] {
					t.Fatalf("id %q; want the user's %q", id, s.ids["ada"])
				}
			}},
		{rpc: "GetUserMetadata", http: "GET /management/v1/users/{id}/metadata/{key}", call: mxRPC(M.GetUserMetadata), kind: mxRead, agg: "ada", obj: "k1",
			req: func(s *mxRun) proto.Message { return &mv1.GetUserMetadataRequest{Id: s.ids["ada"], Key: "k1"} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if v := string(res.(*mv1.GetUserMetadataResponse).GetMetadata().GetValue()); v != "v1" {
					t.Fatalf("value %q; want v1", v)
				}
			}},
		{rpc: "BulkSetUserMetadata", http: "POST /management/v1/users/{id}/metadata/_bulk", call: mxRPC(M.BulkSetUserMetadata), kind: mxWrite, agg: "ada", born: "k3",
			req: func(s *mxRun) proto.Message {
				return &mv1.BulkSetUserMetadataRequest{Id: s.ids["ada"], Metadata: []*mv1.BulkSetUserMetadataRequest_Metadata{
					{Key: "k2", Value: []byte("v2")}, {Key: "k3", Value: []byte("v3")}}}
			}},
		{rpc: "ListUserMetadata", http: "POST /management/v1/users/{id}/metadata/_search", call: mxRPC(M.ListUserMetadata), kind: mxList, agg: "ada", obj: "k3",
			req: func(s *mxRun) proto.Message { return &mv1.ListUserMetadataRequest{Id: s.ids["ada"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if n := res.(*mv1.ListUserMetadataResponse).GetDetails().GetTotalResult(); n != 3 {
					t.Fatalf("total %d; want 3", n)
				}
			}},
		{rpc: "RemoveUserMetadata", http: "DELETE /management/v1/users/{id}/metadata/{key}", call: mxRPC(M.RemoveUserMetadata), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message { return &mv1.RemoveUserMetadataRequest{Id: s.ids["ada"], Key: "k1"} }},
		{rpc: "BulkRemoveUserMetadata", http: "DELETE /management/v1/users/{id}/metadata/_bulk", call: mxRPC(M.BulkRemoveUserMetadata), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.BulkRemoveUserMetadataRequest{Id: s.ids["ada"], Keys: []string{"k2", "k3"}}
			}},
		{rpc: "AddOrgOIDCIDP", http: "POST /management/v1/idps/oidc", call: mxRPC(M.AddOrgOIDCIDP), kind: mxWrite, agg: "idp",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddOrgOIDCIDPRequest{Name: "Upstream", ClientId: "gatehouse", ClientSecret: "upstream-secret",
					Issuer: "https://accounts.example.com", Scopes: []string{"openid", "email"}, AutoRegister: true,
					UsernameMapping: mv1.OIDCMappingField_OIDC_MAPPING_FIELD_EMAIL}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				s.ids["idp"] = res.(*mv1.AddOrgOIDCIDPResponse).GetIdpId()
			}},
		{rpc: "UpdateOrgIDPOIDCConfig", http: "PUT /management/v1/idps/{idp_id}/oidc_config", call: mxRPC(M.UpdateOrgIDPOIDCConfig), kind: mxWrite, agg: "idp",
			req: func(s *mxRun) proto.Message {
				return &mv1.UpdateOrgIDPOIDCConfigRequest{IdpId: s.ids["idp"], ClientId: "gatehouse-2", ClientSecret: "secret-for-gatehouse-2",
					Issuer: "https://login.example.org", Scopes: []string{"profile"}}
			}},
		{rpc: "DeactivateOrgIDP", http: "POST /management/v1/idps/{idp_id}/_deactivate", call: mxRPC(M.DeactivateOrgIDP), kind: mxWrite, agg: "idp",
			req: func(s *mxRun) proto.Message { return &mv1.DeactivateOrgIDPRequest{IdpId: s.ids["idp"]} }},
		{rpc: "ReactivateOrgIDP", http: "POST /management/v1/idps/{idp_id}/_reactivate", call: mxRPC(M.ReactivateOrgIDP), kind: mxWrite, agg: "idp",
			req: func(s *mxRun) proto.Message { return &mv1.ReactivateOrgIDPRequest{IdpId: s.ids["idp"]} }},
		{rpc: "SetOrgIDPTrust", http: "POST /management/v1/idps/{idp_id}/_trust", call: mxRPC(M.SetOrgIDPTrust), kind: mxWrite, agg: "idp",
			req: func(s *mxRun) proto.Message { return &mv1.SetOrgIDPTrustRequest{IdpId: s.ids["idp"], TrustAmr: true} }},
		{rpc: "GetOrgIDPByID", http: "GET /management/v1/idps/{id}", call: mxRPC(M.GetOrgIDPByID), kind: mxRead, agg: "idp",
			req: func(s *mxRun) proto.Message { return &mv1.GetOrgIDPByIDRequest{Id: s.ids["idp"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				p := res.(*mv1.GetOrgIDPByIDResponse).GetIdp()
				c := p.GetOidcConfig()
				if p.GetState() != mv1.IDPState_IDP_STATE_ACTIVE || c.GetClientId() != "gatehouse-2" ||
					c.GetIssuer() != "https://login.example.org" || c.GetUsernameMapping() != mv1.OIDCMappingField_OIDC_MAPPING_FIELD_UNSPECIFIED {
					t.Fatalf("idp = %v; want the active, updated provider", p)
				}
			}},
		{rpc: "ListOrgIDPs", http: "POST /management/v1/idps/_search", call: mxRPC(M.ListOrgIDPs), kind: mxList, agg: "idp",
			req: func(s *mxRun) proto.Message {
				return &mv1.ListOrgIDPsRequest{Queries: []*mv1.IDPQuery{{Query: &mv1.IDPQuery_IdpIdQuery{
					IdpIdQuery: &mv1.IDPIDQuery{Id: s.ids["idp"]}}}}}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if n := res.(*mv1.ListOrgIDPsResponse).GetDetails().GetTotalResult(); n != 1 {
					t.Fatalf("total %d; want 1", n)
				}
				// ada signs in through the IdP: the federation flow links
				// her (internal API), for the two rows that follow.
				if _, err := s.e.Internal(mgmttest.InternalToken).LinkExternalUser(context.Background(), &directoryv1.LinkExternalUserRequest{
					IdpId: s.ids["idp"], ExternalSubject: "subject-" + s.proto, UserId: s.ids["ada"], ExternalUserName: "ada@idp.example",
					Issuer: "https://login.example.org"}); err != nil {
					t.Fatalf("link ada: %v", err)
				}
			}},
		{rpc: "ListUserIDPs", http: "POST /management/v1/users/{user_id}/idps/_search", call: mxRPC(M.ListUserIDPs), kind: mxListBare, agg: "ada",
			req: func(s *mxRun) proto.Message { return &mv1.ListUserIDPsRequest{UserId: s.ids["ada"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListUserIDPsResponse)
				if len(r.GetResult()) != 1 || r.GetDetails().GetTotalResult() != 1 {
					t.Fatalf("links = %v; want ada's one link", r)
				}
				l := r.GetResult()[0]
				if l.GetIdpId() != s.ids["idp"] || l.GetProvidedUserId() != "subject-"+s.proto || l.GetProvidedUserName() != "ada@idp.example" ||
					l.GetIdpName() == "" || l.GetUserId() != s.ids["ada"] || l.GetIdpType() != mv1.IDPType_IDP_TYPE_OIDC {
					t.Fatalf("link = %v", l)
				}
			}},
		{rpc: "RemoveUserIDP", http: "DELETE /management/v1/users/{user_id}/idps/{idp_id}/{linked_user_id}", call: mxRPC(M.RemoveUserIDP), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.RemoveUserIDPRequest{UserId: s.ids["ada"], IdpId: s.ids["idp"], LinkedUserId: "subject-" + s.proto}
			}},
		{rpc: "RegisterTOTP", http: "POST /v2/users/{user_id}/totp", call: mxRPC(M.RegisterTOTP), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message { return &mv1.RegisterTOTPRequest{UserId: s.ids["ada"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.RegisterTOTPResponse)
				if !strings.HasPrefix(r.GetUri(), "otpauth://totp/") || !strings.Contains(r.GetUri(), "secret="+r.GetSecret()) {
					t.Fatalf("registration = %v", r)
				}
				s.ids["totpSecret"] = r.GetSecret()
			}},
		{rpc: "VerifyTOTPRegistration", http: "POST /v2/users/{user_id}/totp/verify", call: mxRPC(M.VerifyTOTPRegistration), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				code, _ := totp.GenerateCode(s.ids["totpSecret"], time.Now())
				return &mv1.VerifyTOTPRegistrationRequest{UserId: s.ids["ada"], Code: code}
			}},
		{rpc: "ListHumanAuthFactors", http: "POST /management/v1/users/{user_id}/auth_factors/_search", call: mxRPC(M.ListHumanAuthFactors), kind: mxNoDetails, agg: "ada",
			req: func(s *mxRun) proto.Message { return &mv1.ListHumanAuthFactorsRequest{UserId: s.ids["ada"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListHumanAuthFactorsResponse).GetResult()
				if len(r) != 1 || r[0].GetOtp() == nil || r[0].GetState() != mv1.AuthFactorState_AUTH_FACTOR_STATE_READY {
					t.Fatalf("factors = %v; want ada's ready TOTP generator", r)
				}
			}},
		{rpc: "RemoveHumanAuthFactorOTP", http: "DELETE /management/v1/users/{user_id}/auth_factors/otp", call: mxRPC(M.RemoveHumanAuthFactorOTP), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message { return &mv1.RemoveHumanAuthFactorOTPRequest{UserId: s.ids["ada"]} }},
		{rpc: "RemoveTOTP", http: "DELETE /v2/users/{user_id}/totp", call: mxRPC(M.RemoveTOTP), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				// A registration started again: RemoveTOTP removes an
				// unfinished one too.
				s.e.REST("POST", "/v2/users/"+s.ids["ada"]+"/totp", s.e.AdminToken, s.ids["org"], map[string]any{})
				return &mv1.RemoveTOTPRequest{UserId: s.ids["ada"]}
			}},
		{rpc: "RegisterU2F", http: "POST /v2/users/{user_id}/u2f", call: mxRPC(M.RegisterU2F), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.RegisterU2FRequest{UserId: s.ids["ada"], Domain: "localhost"}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.RegisterU2FResponse)
				s.ids["u2f"], s.ids["u2fOptions"] = r.GetU2FId(), mxJSON(t, r.GetPublicKeyCredentialCreationOptions())
			}},
		{rpc: "VerifyU2FRegistration", http: "POST /v2/users/{user_id}/u2f/{u2f_id}", call: mxRPC(M.VerifyU2FRegistration), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.VerifyU2FRegistrationRequest{UserId: s.ids["ada"], U2FId: s.ids["u2f"], TokenName: "key",
					PublicKeyCredential: mxCredential(s.ids["u2fOptions"], false)}
			}},
		{rpc: "RegisterPasskey", http: "POST /v2/users/{user_id}/passkeys", call: mxRPC(M.RegisterPasskey), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message { return &mv1.RegisterPasskeyRequest{UserId: s.ids["ada"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.RegisterPasskeyResponse)
				s.ids["passkey"], s.ids["passkeyOptions"] = r.GetPasskeyId(), mxJSON(t, r.GetPublicKeyCredentialCreationOptions())
			}},
		{rpc: "VerifyPasskeyRegistration", http: "POST /v2/users/{user_id}/passkeys/{passkey_id}", call: mxRPC(M.VerifyPasskeyRegistration), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.VerifyPasskeyRegistrationRequest{UserId: s.ids["ada"], PasskeyId: s.ids["passkey"], PasskeyName: "laptop",
					PublicKeyCredential: mxCredential(s.ids["passkeyOptions"], true)}
			}},
		{rpc: "ListPasskeys", http: "POST /v2/users/{user_id}/passkeys/_search", call: mxRPC(M.ListPasskeys), kind: mxListBare, agg: "ada",
			req: func(s *mxRun) proto.Message { return &mv1.ListPasskeysRequest{UserId: s.ids["ada"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListPasskeysResponse).GetResult()
				if len(r) != 1 || r[0].GetId() != s.ids["passkey"] || r[0].GetName() != "laptop" || r[0].GetState() != mv1.AuthFactorState_AUTH_FACTOR_STATE_READY {
					t.Fatalf("passkeys = %v", r)
				}
			}},
		{rpc: "ListHumanPasswordless", http: "POST /management/v1/users/{user_id}/passwordless/_search", call: mxRPC(M.ListHumanPasswordless), kind: mxNoDetails, agg: "ada",
			req: func(s *mxRun) proto.Message { return &mv1.ListHumanPasswordlessRequest{UserId: s.ids["ada"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListHumanPasswordlessResponse).GetResult()
				if len(r) != 1 || r[0].GetId() != s.ids["passkey"] || r[0].GetState() != mv1.AuthFactorState_AUTH_FACTOR_STATE_READY {
					t.Fatalf("passkeys = %v", r)
				}
			}},
		{rpc: "RemoveHumanAuthFactorU2F", http: "DELETE /management/v1/users/{user_id}/auth_factors/u2f/{token_id}", call: mxRPC(M.RemoveHumanAuthFactorU2F), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.RemoveHumanAuthFactorU2FRequest{UserId: s.ids["ada"], TokenId: mxStart(s, "u2f", "u2fId")}
			}},
		{rpc: "RemoveU2F", http: "DELETE /v2/users/{user_id}/u2f/{u2f_id}", call: mxRPC(M.RemoveU2F), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.RemoveU2FRequest{UserId: s.ids["ada"], U2FId: mxStart(s, "u2f", "u2fId")}
			}},
		{rpc: "RemoveHumanPasswordless", http: "DELETE /management/v1/users/{user_id}/passwordless/{token_id}", call: mxRPC(M.RemoveHumanPasswordless), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.RemoveHumanPasswordlessRequest{UserId: s.ids["ada"], TokenId: mxStart(s, "passkeys", "passkeyId")}
			}},
		{rpc: "RemovePasskey", http: "DELETE /v2/users/{user_id}/passkeys/{passkey_id}", call: mxRPC(M.RemovePasskey), kind: mxWrite, agg: "ada",
			req: func(s *mxRun) proto.Message {
				return &mv1.RemovePasskeyRequest{UserId: s.ids["ada"], PasskeyId: mxStart(s, "passkeys", "passkeyId")}
			}},
		{rpc: "RemoveOrgIDP", http: "DELETE /management/v1/idps/{idp_id}", call: mxRPC(M.RemoveOrgIDP), kind: mxWrite, agg: "idp",
			req: func(s *mxRun) proto.Message { return &mv1.RemoveOrgIDPRequest{IdpId: s.ids["idp"]} }},
		{rpc: "AddProject", http: "POST /management/v1/projects", call: mxRPC(M.AddProject), kind: mxWrite, agg: "project",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddProjectRequest{Name: "Portal", ProjectRoleAssertion: true,
					PrivateLabelingSetting: mv1.PrivateLabelingSetting_PRIVATE_LABELING_SETTING_ENFORCE_PROJECT_RESOURCE_OWNER_POLICY}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				s.ids["project"] = res.(*mv1.AddProjectResponse).GetId()
			}},
		{rpc: "GetProjectByID", http: "GET /management/v1/projects/{id}", call: mxRPC(M.GetProjectByID), kind: mxRead, agg: "project",
			req: func(s *mxRun) proto.Message { return &mv1.GetProjectByIDRequest{Id: s.ids["project"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				p := res.(*mv1.GetProjectByIDResponse).GetProject()
				if p.GetName() != "Portal" || !p.GetProjectRoleAssertion() || p.GetState() != mv1.ProjectState_PROJECT_STATE_ACTIVE {
					t.Fatalf("project = %v; want Portal", p)
				}
			}},
		{rpc: "ListProjects", http: "POST /management/v1/projects/_search", call: mxRPC(M.ListProjects), kind: mxList, agg: "project",
			req: func(s *mxRun) proto.Message {
				return &mv1.ListProjectsRequest{Queries: []*mv1.ProjectQuery{{Query: &mv1.ProjectQuery_NameQuery{
					NameQuery: &mv1.ProjectNameQuery{Name: "ort", Method: mv1.TextQueryMethod_TEXT_QUERY_METHOD_CONTAINS}}}}}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListProjectsResponse)
				if r.GetDetails().GetTotalResult() != 1 || len(r.GetResult()) != 1 || r.GetResult()[0].GetName() != "Portal" {
					t.Fatalf("projects = %v; want Portal only", r)
				}
			}},
		{rpc: "AddOIDCApp", http: "POST /management/v1/projects/{project_id}/apps/oidc", call: mxRPC(M.AddOIDCApp), kind: mxWrite, agg: "project", born: "web",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddOIDCAppRequest{ProjectId: s.ids["project"], Name: "web",
					RedirectUris: []string{"https://rp.example.com/cb"}, AppType: mv1.OIDCAppType_OIDC_APP_TYPE_WEB,
					AuthMethodType: mv1.OIDCAuthMethodType_OIDC_AUTH_METHOD_TYPE_BASIC, ClockSkew: durationpb.New(0)}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.AddOIDCAppResponse)
				s.ids["web"] = r.GetAppId()
				if r.GetClientId() == "" || len(r.GetClientSecret()) < 20 {
					t.Fatalf("client id %q, secret of %d characters; want both", r.GetClientId(), len(r.GetClientSecret()))
				}
			}},
		{rpc: "UpdateOIDCAppConfig", http: "PUT /management/v1/projects/{project_id}/apps/{app_id}/oidc_config", call: mxRPC(M.UpdateOIDCAppConfig), kind: mxWrite, agg: "project",
			req: func(s *mxRun) proto.Message {
				return &mv1.UpdateOIDCAppConfigRequest{ProjectId: s.ids["project"], AppId: s.ids["web"],
					RedirectUris:           []string{"https://rp.example.com/callback"},
					GrantTypes:             []mv1.OIDCGrantType{mv1.OIDCGrantType_OIDC_GRANT_TYPE_AUTHORIZATION_CODE, mv1.OIDCGrantType_OIDC_GRANT_TYPE_REFRESH_TOKEN},
					AppType:                mv1.OIDCAppType_OIDC_APP_TYPE_WEB,
					AuthMethodType:         mv1.OIDCAuthMethodType_OIDC_AUTH_METHOD_TYPE_POST,
					PostLogoutRedirectUris: []string{"https://rp.example.com/bye"},
					AccessTokenType:        mv1.OIDCTokenType_OIDC_TOKEN_TYPE_JWT}
			}},
		{rpc: "RegenerateOIDCClientSecret", http: "POST /management/v1/projects/{project_id}/apps/{app_id}/oidc_config/_generate_client_secret", call: mxRPC(M.RegenerateOIDCClientSecret), kind: mxWrite, agg: "project",
			req: func(s *mxRun) proto.Message {
				return &mv1.RegenerateOIDCClientSecretRequest{ProjectId: s.ids["project"], AppId: s.ids["web"]}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if n := len(res.(*mv1.RegenerateOIDCClientSecretResponse).GetClientSecret()); n < 20 {
					t.Fatalf("secret of %d characters; want a long one", n)
				}
			}},
		{rpc: "SetAppAdminClient", http: "POST /management/v1/projects/{project_id}/apps/{app_id}/_admin_client", call: mxRPC(M.SetAppAdminClient), kind: mxWrite, agg: "project",
			req: func(s *mxRun) proto.Message {
				return &mv1.SetAppAdminClientRequest{ProjectId: s.ids["project"], AppId: s.ids["web"], AdminClient: true}
			}},
		{rpc: "AddAPIApp", http: "POST /management/v1/projects/{project_id}/apps/api", call: mxRPC(M.AddAPIApp), kind: mxWrite, agg: "project", born: "api",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddAPIAppRequest{ProjectId: s.ids["project"], Name: "api",
					AuthMethodType: mv1.APIAuthMethodType_API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.AddAPIAppResponse)
				s.ids["api"] = r.GetAppId()
				s.ids["apiClient"] = r.GetClientId()
				if r.GetClientId() == "" || r.GetClientSecret() != "" {
					t.Fatalf("client id %q, secret %q; want an id and no secret (private_key_jwt)", r.GetClientId(), r.GetClientSecret())
				}
			}},
		{rpc: "AddProjectGrant", http: "POST /management/v1/projects/{project_id}/grants", call: mxRPC(M.AddProjectGrant), kind: mxWrite, agg: "project", born: "grant",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddProjectGrantRequest{ProjectId: s.ids["project"], GrantedOrgId: s.ids["home"]}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				s.ids["grant"] = res.(*mv1.AddProjectGrantResponse).GetGrantId()
			}},
		{rpc: "UpdateProjectGrant", http: "PUT /management/v1/projects/{project_id}/grants/{grant_id}", call: mxRPC(M.UpdateProjectGrant), kind: mxWrite, agg: "project",
			req: func(s *mxRun) proto.Message {
				return &mv1.UpdateProjectGrantRequest{ProjectId: s.ids["project"], GrantId: s.ids["grant"]}
			}},
		{rpc: "ListProjectGrants", http: "POST /management/v1/projects/{project_id}/grants/_search", call: mxRPC(M.ListProjectGrants), kind: mxList, agg: "project", obj: "grant",
			req: func(s *mxRun) proto.Message { return &mv1.ListProjectGrantsRequest{ProjectId: s.ids["project"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListProjectGrantsResponse)
				if len(r.GetResult()) != 1 || r.GetResult()[0].GetGrantedOrgId() != s.ids["home"] || r.GetResult()[0].GetGrantedOrgName() == "" {
					t.Fatalf("grants = %v; want the grant to the home organization with its name", r.GetResult())
				}
			}},
		{rpc: "RemoveProjectGrant", http: "DELETE /management/v1/projects/{project_id}/grants/{grant_id}", call: mxRPC(M.RemoveProjectGrant), kind: mxWrite, agg: "project",
			req: func(s *mxRun) proto.Message {
				return &mv1.RemoveProjectGrantRequest{ProjectId: s.ids["project"], GrantId: s.ids["grant"]}
			}},
		{rpc: "ListGrantedProjects", http: "POST /management/v1/granted_projects/_search", call: mxRPC(M.ListGrantedProjects), kind: mxListBare, agg: "org",
			req: func(s *mxRun) proto.Message { return &mv1.ListGrantedProjectsRequest{} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if n := len(res.(*mv1.ListGrantedProjectsResponse).GetResult()); n != 0 {
					t.Fatalf("%d grants received; want none yet", n)
				}
				// The home organization grants a project of its own to
				// this one, for the next rows.
				r := s.e.REST("POST", "/management/v1/projects", s.e.AdminToken, s.ids["home"], map[string]any{"name": "Shared " + s.proto})
				pid, _ := r.JSON["id"].(string)
				g := s.e.REST("POST", "/management/v1/projects/"+pid+"/grants", s.e.AdminToken, s.ids["home"], map[string]any{"grantedOrgId": s.ids["org"]})
				gid, _ := g.JSON["grantId"].(string)
				if pid == "" || gid == "" {
					t.Fatalf("grant to this organization: %d %s / %d %s", r.Status, r.Body, g.Status, g.Body)
				}
				s.ids["receivedProject"], s.ids["receivedGrant"] = pid, gid
				list, err := s.e.Client("connect", s.e.AdminToken, s.ids["org"]).ListGrantedProjects(context.Background(), &mv1.ListGrantedProjectsRequest{})
				if err != nil {
					t.Fatal(err)
				}
				got := list.GetResult()
				if len(got) != 1 || got[0].GetGrantId() != gid || got[0].GetProjectId() != pid || got[0].GetProjectName() != "Shared "+s.proto ||
					got[0].GetProjectOwnerId() != s.ids["home"] || got[0].GetGrantedOrgId() != s.ids["org"] {
					t.Fatalf("grants received = %v; want the home organization's grant of %s", got, pid)
				}
			}},
		{rpc: "RefuseGrantedProject", http: "POST /management/v1/granted_projects/{project_id}/grants/{grant_id}/_refuse", call: mxRPC(M.RefuseGrantedProject),
			kind: mxWrite, agg: "receivedProject", owner: "home",
			req: func(s *mxRun) proto.Message {
				return &mv1.RefuseGrantedProjectRequest{ProjectId: s.ids["receivedProject"], GrantId: s.ids["receivedGrant"]}
			}},
		{rpc: "AddAppKey", http: "POST /management/v1/projects/{project_id}/apps/{app_id}/keys", call: mxRPC(M.AddAppKey), kind: mxWrite, agg: "project",
			req: func(s *mxRun) proto.Message {
				return &mv1.AddAppKeyRequest{ProjectId: s.ids["project"], AppId: s.ids["api"], Type: mv1.KeyType_KEY_TYPE_JSON}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.AddAppKeyResponse)
				s.ids["apiKey"] = r.GetId()
				mxKeyFile(t, r.GetKeyDetails(), map[string]string{"type": "application", "keyId": r.GetId(),
					"appId": s.ids["api"], "clientId": s.ids["apiClient"]})
			}},
		{rpc: "GetAppByID", http: "GET /management/v1/projects/{project_id}/apps/{app_id}", call: mxRPC(M.GetAppByID), kind: mxRead, agg: "project", obj: "api",
			req: func(s *mxRun) proto.Message {
				return &mv1.GetAppByIDRequest{ProjectId: s.ids["project"], AppId: s.ids["api"]}
			},
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				a := res.(*mv1.GetAppByIDResponse).GetApp()
				if a.GetName() != "api" || a.GetApiConfig().GetClientId() != s.ids["apiClient"] ||
					a.GetApiConfig().GetAuthMethodType() != mv1.APIAuthMethodType_API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT {
					t.Fatalf("app = %v; want the API app", a)
				}
			}},
		{rpc: "ListApps", http: "POST /management/v1/projects/{project_id}/apps/_search", call: mxRPC(M.ListApps), kind: mxList, agg: "project", obj: "api",
			req: func(s *mxRun) proto.Message { return &mv1.ListAppsRequest{ProjectId: s.ids["project"]} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				r := res.(*mv1.ListAppsResponse)
				// By name, descending: web, then api.
				if r.GetDetails().GetTotalResult() != 2 || len(r.GetResult()) != 2 || r.GetResult()[0].GetName() != "web" ||
					r.GetResult()[1].GetApiConfig().GetClientId() != s.ids["apiClient"] ||
					!r.GetResult()[0].GetAdminClient() || r.GetResult()[0].GetOidcConfig().GetClientId() == "" {
					t.Fatalf("apps = %v; want web (admin client), then api", r)
				}
			}},
		{rpc: "RemoveAppKey", http: "DELETE /management/v1/projects/{project_id}/apps/{app_id}/keys/{key_id}", call: mxRPC(M.RemoveAppKey), kind: mxWrite, agg: "project",
			req: func(s *mxRun) proto.Message {
				return &mv1.RemoveAppKeyRequest{ProjectId: s.ids["project"], AppId: s.ids["api"], KeyId: s.ids["apiKey"]}
			}},
		{rpc: "SetSecurityPolicy", http: "PUT /management/v1/policies/security", call: mxRPC(M.SetSecurityPolicy), kind: mxWrite, agg: "org", born: "security",
			req: func(s *mxRun) proto.Message {
				s.ids["security"] = "" // a policy has no id of its own
				return &mv1.SetSecurityPolicyRequest{EnableImpersonation: true}
			}},
		{rpc: "GetSecurityPolicy", http: "GET /management/v1/policies/security", call: mxRPC(M.GetSecurityPolicy), kind: mxRead, agg: "org", obj: "security",
			req: func(s *mxRun) proto.Message { return &mv1.GetSecurityPolicyRequest{} },
			after: func(t *testing.T, s *mxRun, res proto.Message) {
				if !res.(*mv1.GetSecurityPolicyResponse).GetPolicy().GetEnableImpersonation() {
					t.Error("impersonation not enabled after SetSecurityPolicy")
				}
			}},
	}
}

// mxKeyFile checks a returned key file: JSON with the given string fields
// and a PEM private key.
func mxKeyFile(t *testing.T, raw []byte, want map[string]string) {
	t.Helper()
	var kf map[string]any
	if err := json.Unmarshal(raw, &kf); err != nil {
		t.Fatalf("key file %q: %v", raw, err)
	}
	for k, v := range want {
		if kf[k] != v {
			t.Fatalf("key file %s = %v; want %q", k, kf[k], v)
		}
	}
	if k, _ := kf["key"].(string); !strings.HasPrefix(k, "-----BEGIN ") {
		t.Fatalf("key file has no PEM private key")
	}
}

// mxService is the descriptor of ManagementService.
func mxService() protoreflect.ServiceDescriptor {
	return mv1.File_gatehouse_management_v1_management_proto.Services().ByName("ManagementService")
}

// mxHTTPRule returns "VERB path" and the body selector of a method's
// google.api.http annotation.
func mxHTTPRule(m protoreflect.MethodDescriptor) (verbPath, body string) {
	rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
	switch p := rule.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		return "GET " + p.Get, rule.GetBody()
	case *annotations.HttpRule_Post:
		return "POST " + p.Post, rule.GetBody()
	case *annotations.HttpRule_Put:
		return "PUT " + p.Put, rule.GetBody()
	case *annotations.HttpRule_Delete:
		return "DELETE " + p.Delete, rule.GetBody()
	case *annotations.HttpRule_Patch:
		return "PATCH " + p.Patch, rule.GetBody()
	}
	return "", ""
}

// mxREST sends req as a REST client would: path variables filled from the
// request's fields, the remaining fields as the JSON body (body "*"), and
// decodes the answer strictly (unknown fields fail) into the method's
// response type.
func mxREST(t *testing.T, e *mgmttest.Env, m protoreflect.MethodDescriptor, org string, req proto.Message) (proto.Message, *mgmttest.Response) {
	t.Helper()
	verbPath, bodySel := mxHTTPRule(m)
	verb, tmpl, _ := strings.Cut(verbPath, " ")
	body := proto.Clone(req).ProtoReflect()
	fields := body.Descriptor().Fields()
	path := tmpl
	for strings.Contains(path, "{") {
		i := strings.Index(path, "{")
		j := strings.Index(path[i:], "}") + i
		name := path[i+1 : j]
		fd := fields.ByName(protoreflect.Name(name))
		if fd == nil {
			t.Fatalf("path variable %s is no field of %s", name, body.Descriptor().FullName())
		}
		v := body.Get(fd).String()
		if v == "" {
			t.Fatalf("path variable %s is empty", name)
		}
		body.Clear(fd)
		path = path[:i] + url.PathEscape(v) + path[j+1:]
	}
	var payload any
	switch bodySel {
	case "*":
		raw, err := protojson.Marshal(body.Interface())
		if err != nil {
			t.Fatal(err)
		}
		payload = string(raw)
	case "":
		set := false
		body.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool { set = true; return false })
		if set {
			t.Fatalf("%s %s has no body but the request sets non-path fields", verb, tmpl)
		}
	default:
		t.Fatalf("body %q is not supported by this test", bodySel)
	}
	r := e.REST(verb, path, e.AdminToken, org, payload)
	if r.Status != 200 {
		return nil, r
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
	if err != nil {
		t.Fatal(err)
	}
	res := mt.New().Interface()
	if err := protojson.Unmarshal(r.Body, res); err != nil {
		t.Fatalf("decode %s: %v in %s", m.Output().FullName(), err, r.Body)
	}
	return res, r
}

// mxCarried returns the details and id (or key) of the object a read
// response carries: the message field holding an ObjectDetails.
func mxCarried(res proto.Message) (*mv1.ObjectDetails, string) {
	m := res.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.Kind() != protoreflect.MessageKind || fd.IsList() || fd.IsMap() {
			continue
		}
		if d, id := mxObject(m.Get(fd).Message()); d != nil {
			return d, id
		}
	}
	return nil, ""
}

// mxObject returns an object's ObjectDetails and its id (or key) field.
func mxObject(o protoreflect.Message) (*mv1.ObjectDetails, string) {
	fields := o.Descriptor().Fields()
	dfd := fields.ByName("details")
	if dfd == nil || dfd.Message() == nil || dfd.Message().FullName() != "gatehouse.management.v1.ObjectDetails" || !o.Has(dfd) {
		return nil, ""
	}
	d, _ := o.Get(dfd).Message().Interface().(*mv1.ObjectDetails)
	for _, n := range []protoreflect.Name{"id", "key", "grant_id", "user_id"} {
		if fd := fields.ByName(n); fd != nil {
			return d, o.Get(fd).String()
		}
	}
	return d, ""
}

// mxListed finds the result whose id (or key) is id.
func mxListed(res proto.Message, id string) *mv1.ObjectDetails {
	m := res.ProtoReflect()
	list := m.Get(m.Descriptor().Fields().ByName("result")).List()
	for i := 0; i < list.Len(); i++ {
		if d, got := mxObject(list.Get(i).Message()); got == id {
			return d
		}
	}
	return nil
}

// mxCheckDetails compares the response's details with the events.
func mxCheckDetails(t *testing.T, s *mxRun, row mxRow, res proto.Message) {
	t.Helper()
	aggID := s.id(t, row.agg)
	evs := s.e.Events(aggID)
	if len(evs) == 0 {
		t.Fatalf("no events for %s %s", row.agg, aggID)
	}
	last := evs[len(evs)-1]
	org := s.ids["org"]
	if row.owner != "" {
		org = s.ids[row.owner]
	}
	if last.ResourceOwner != org {
		t.Fatalf("last event of %s has resource owner %q; want the org %q", row.agg, last.ResourceOwner, org)
	}
	obj, first := row.agg, evs[0]
	if row.obj != "" {
		obj = row.obj
		b, ok := s.born[obj]
		if !ok {
			t.Fatalf("no creation event recorded for %s", obj)
		}
		first = b
	}
	want := func(what string, d *mv1.ObjectDetails, created eventstore.Event) {
		t.Helper()
		if d.GetSequence() != last.Sequence || !d.GetCreationDate().AsTime().Equal(created.CreatedAt) ||
			!d.GetChangeDate().AsTime().Equal(last.CreatedAt) || d.GetResourceOwner() != org {
			t.Fatalf("%s = %v; want sequence %d, created %v, changed %v, owner %s (last event %s)",
				what, d, last.Sequence, created.CreatedAt.UTC(), last.CreatedAt.UTC(), org, last.Type)
		}
	}
	switch row.kind {
	case mxNoDetails:
	case mxWrite:
		m := res.ProtoReflect()
		fd := m.Descriptor().Fields().ByName("details")
		d, _ := m.Get(fd).Message().Interface().(*mv1.ObjectDetails)
		want("details", d, last)
	case mxRead:
		d, id := mxCarried(res)
		if id != s.id(t, obj) {
			t.Fatalf("response carries %q; want %s %q", id, obj, s.id(t, obj))
		}
		want("details", d, first)
	case mxListBare:
		m := res.ProtoReflect()
		ld, _ := m.Get(m.Descriptor().Fields().ByName("details")).Message().Interface().(*mv1.ListDetails)
		if ld.GetProcessedSequence() != last.Sequence || !ld.GetViewTimestamp().AsTime().Equal(last.CreatedAt) {
			t.Fatalf("list details = %v; want processed sequence %d and view timestamp %v", ld, last.Sequence, last.CreatedAt.UTC())
		}
	case mxList:
		m := res.ProtoReflect()
		ld, _ := m.Get(m.Descriptor().Fields().ByName("details")).Message().Interface().(*mv1.ListDetails)
		if ld.GetProcessedSequence() != last.Sequence || !ld.GetViewTimestamp().AsTime().Equal(last.CreatedAt) {
			t.Fatalf("list details = %v; want processed sequence %d and view timestamp %v", ld, last.Sequence, last.CreatedAt.UTC())
		}
		d := mxListed(res, s.id(t, obj))
		if d == nil {
			t.Fatalf("%s %q is not in the result", obj, s.id(t, obj))
		}
		want("result details", d, first)
	}
}

// TestMatrix calls every ManagementService RPC over REST, Connect, gRPC and
// gRPC-web, on SQLite and PostgreSQL, each with a valid request that must
// succeed, and compares the response's details with the event table.
func TestMatrix(t *testing.T) {
	rows := mxTable()
	// The table covers the service exactly, with the annotated REST paths.
	methods := mxService().Methods()
	seen := map[string]bool{}
	for _, r := range rows {
		m := methods.ByName(protoreflect.Name(r.rpc))
		if m == nil {
			t.Fatalf("row %s is no ManagementService method", r.rpc)
		}
		if seen[r.rpc] {
			t.Fatalf("row %s appears twice", r.rpc)
		}
		seen[r.rpc] = true
		if got, _ := mxHTTPRule(m); got != r.http {
			t.Errorf("%s: google.api.http is %q; want %q", r.rpc, got, r.http)
		}
	}
	for i := 0; i < methods.Len(); i++ {
		if name := string(methods.Get(i).Name()); !seen[name] {
			t.Errorf("ManagementService.%s is missing from the matrix", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		for _, p := range append([]string{"rest"}, mgmttest.Protocols...) {
			t.Run(p, func(t *testing.T) {
				s := &mxRun{e: e, proto: p, ids: map[string]string{"k1": "k1", "k3": "k3", "home": e.OrgID}, born: map[string]eventstore.Event{}}
				for _, row := range rows {
					ok := t.Run(row.rpc, func(t *testing.T) {
						m := methods.ByName(protoreflect.Name(row.rpc))
						req := row.req(s)
						if got := req.ProtoReflect().Descriptor().FullName(); got != m.Input().FullName() {
							t.Fatalf("request is %s; want %s", got, m.Input().FullName())
						}
						org := s.ids["org"] // "" for AddOrg: the admin's own organization
						var res proto.Message
						if p == "rest" {
							var r *mgmttest.Response
							if res, r = mxREST(t, e, m, org, req); res == nil {
								t.Fatalf("status %d %s; want 200", r.Status, r.Body)
							}
						} else {
							var err error
							if res, err = row.call(context.Background(), e.Client(p, e.AdminToken, org), req); err != nil {
								t.Fatalf("%v (code %v)", err, connect.CodeOf(err))
							}
						}
						if got := res.ProtoReflect().Descriptor().FullName(); got != m.Output().FullName() {
							t.Fatalf("response is %s; want %s", got, m.Output().FullName())
						}
						if row.after != nil {
							row.after(t, s, res)
						}
						if row.born != "" {
							evs := e.Events(s.id(t, row.agg))
							s.born[row.born] = evs[len(evs)-1]
						}
						mxCheckDetails(t, s, row, res)
					})
					if !ok {
						break // later rows need what this one should have made
					}
				}
			})
		}
	})
}

// mxJSON is a Struct as JSON.
func mxJSON(t *testing.T, m *structpb.Struct) string {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mxCredential answers creation options (JSON) with a new credential of
// a software authenticator on the test issuer's origin. Without options
// (the authorization matrix builds the row alone) it is an empty one.
func mxCredential(options string, uv bool) *structpb.Struct {
	out := &structpb.Struct{}
	a := &webauthntest.Authenticator{Origin: "http://localhost:8080", UV: uv}
	if resp, _, err := a.Create([]byte(options)); err == nil {
		_ = protojson.Unmarshal(resp, out)
	}
	return out
}

// mxStart starts a WebAuthn registration of ada's (path "u2f" or
// "passkeys") as the admin, and returns its id (the field idField): the
// remove calls remove an unfinished registration too.
func mxStart(s *mxRun, path, idField string) string {
	r := s.e.REST("POST", "/v2/users/"+s.ids["ada"]+"/"+path, s.e.AdminToken, s.ids["org"], map[string]any{})
	id, _ := r.JSON[idField].(string)
	if id == "" {
		id = "no-such-factor" // the caller may not start one: the remove is refused anyway
	}
	return id
}
