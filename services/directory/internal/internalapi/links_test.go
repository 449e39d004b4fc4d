package internalapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// addIdP creates an OIDC IdP in org through the management REST API.
func addIdP(t *testing.T, e *mgmttest.Env, org, name, secret string) string {
	t.Helper()
	r := e.REST("POST", "/management/v1/idps/oidc", e.AdminToken, org, map[string]any{
		"name": name, "clientId": "client-" + name, "clientSecret": secret, "issuer": "https://idp.example.com/" + name,
		"scopes": []string{"email", "profile", "openid"}, "stylingType": "STYLING_TYPE_VENDOR",
		"displayNameMapping": "OIDC_MAPPING_FIELD_EMAIL", "usernameMapping": "OIDC_MAPPING_FIELD_PREFERRED_USERNAME",
		"autoRegister": true,
	})
	id, _ := r.JSON["idpId"].(string)
	if r.Status != 200 || id == "" {
		t.Fatalf("add IdP %s: %d %s", name, r.Status, r.Body)
	}
	issuers.Store(id, "https://idp.example.com/"+name)
	return id
}

// issuers are the issuers addIdP configured, by IdP id: authn names the
// issuer it verified an identity against.
var issuers sync.Map

func issuerOf(idp string) string {
	iss, _ := issuers.Load(idp)
	s, _ := iss.(string)
	return s
}

// restOK sends a management REST request that must succeed.
func restOK(t *testing.T, e *mgmttest.Env, method, path, org string, body any) {
	t.Helper()
	if r := e.REST(method, path, e.AdminToken, org, body); r.Status != 200 {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
}

func link(c directoryv1connect.DirectoryServiceClient, idp, sub, user string) error {
	_, err := c.LinkExternalUser(context.Background(), &directoryv1.LinkExternalUserRequest{
		IdpId: idp, ExternalSubject: sub, UserId: user, Issuer: issuerOf(idp)})
	return err
}

func linked(c directoryv1connect.DirectoryServiceClient, idp, sub string) (*directoryv1.User, error) {
	res, err := c.GetLinkedUser(context.Background(), &directoryv1.GetLinkedUserRequest{IdpId: idp, ExternalSubject: sub, Issuer: issuerOf(idp)})
	if err != nil {
		return nil, err
	}
	return res.GetUser(), nil
}

func unlink(c directoryv1connect.DirectoryServiceClient, idp, sub string) error {
	_, err := c.UnlinkExternalUser(context.Background(), &directoryv1.UnlinkExternalUserRequest{IdpId: idp, ExternalSubject: sub})
	return err
}

func registerExternal(c directoryv1connect.DirectoryServiceClient, idp, sub, name string) (*directoryv1.User, error) {
	res, err := c.RegisterExternalUser(context.Background(), &directoryv1.RegisterExternalUserRequest{
		IdpId: idp, ExternalSubject: sub, UserName: name, FirstName: "Ext", LastName: "Ern", Email: name + "@idp.example.com",
		EmailVerified: true, PreferredLanguage: "de", Issuer: issuerOf(idp),
	})
	if err != nil {
		return nil, err
	}
	return res.GetUser(), nil
}

// linkCount counts user_links rows matching a column.
func linkCount(t *testing.T, e *mgmttest.Env, column, value string) int {
	t.Helper()
	var n int
	if err := e.DB.Get(context.Background(), &n, `SELECT COUNT(*) FROM user_links WHERE `+column+` = ?`, value); err != nil {
		t.Fatal(err)
	}
	return n
}

// refusal is the outcome of a refused call and the code it must have.
type refusal struct {
	err  error
	want connect.Code
}

// refusals runs calls that must fail with their codes and add no events.
func refusals(t *testing.T, e *mgmttest.Env, cases map[string]refusal, before int) {
	t.Helper()
	for name, tc := range cases {
		if connect.CodeOf(tc.err) != tc.want {
			t.Errorf("%s: %v; want %v", name, tc.err, tc.want)
		}
	}
	if after := e.EventCount(); after != before {
		t.Fatalf("refused requests added %d events", after-before)
	}
}

func TestExternalLinks(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		c := e.Internal(mgmttest.InternalToken)
		otherOrg, otherOwner := e.SeedOrg("Other Org", "owner2")

		const secret = "idp-client-secret-0123"
		idp := addIdP(t, e, "", "Zeta", secret)
		second := addIdP(t, e, "", "Alpha", "second-secret")
		inactive := addIdP(t, e, "", "Mu", "inactive-secret")
		restOK(t, e, "POST", "/management/v1/idps/"+inactive+"/_deactivate", "", map[string]any{})
		foreignIdP := addIdP(t, e, otherOrg, "Foreign", "foreign-secret")

		t.Run("credential required", func(t *testing.T) {
			_, err := e.Internal("").GetIdP(ctx, &directoryv1.GetIdPRequest{OrgId: e.OrgID, IdpId: idp})
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("GetIdP without credential: %v; want Unauthenticated", err)
			}
			if _, err := linked(e.Internal("wrong-token-wrong-token-wrong-token"), idp, "x"); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("GetLinkedUser with a wrong credential: %v; want Unauthenticated", err)
			}
		})

		// An identity verified against another issuer than the IdP's (the
		// IdP was repointed while the sign-in was under way) names nobody
		// and links nothing.
		t.Run("issuer changed during the sign-in", func(t *testing.T) {
			kim := e.SeedUser(e.OrgID, "kim")
			if err := link(c, idp, "sub-kim", kim); err != nil {
				t.Fatal(err)
			}
			old := directoryv1.GetLinkedUserRequest{IdpId: idp, ExternalSubject: "sub-kim", Issuer: "https://idp.example.com/before"}
			if _, err := c.GetLinkedUser(ctx, &old); connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Errorf("GetLinkedUser for another issuer: %v; want FailedPrecondition", err)
			}
			kai := e.SeedUser(e.OrgID, "kai")
			if _, err := c.LinkExternalUser(ctx, &directoryv1.LinkExternalUserRequest{IdpId: idp, ExternalSubject: "sub-kai",
				UserId: kai, Issuer: "https://idp.example.com/before"}); connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Errorf("LinkExternalUser for another issuer: %v; want FailedPrecondition", err)
			}
			if _, err := c.RegisterExternalUser(ctx, &directoryv1.RegisterExternalUserRequest{IdpId: idp, ExternalSubject: "sub-kai",
				UserName: "kai2", FirstName: "K", LastName: "K", Email: "kai2@example.com"}); connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Errorf("RegisterExternalUser without the issuer: %v; want FailedPrecondition", err)
			}
			if n := linkCount(t, e, "external_subject", "sub-kai"); n != 0 {
				t.Errorf("%d links of the refused identity", n)
			}
		})

		t.Run("GetIdP", func(t *testing.T) {
			res, err := c.GetIdP(ctx, &directoryv1.GetIdPRequest{OrgId: e.OrgID, IdpId: idp})
			if err != nil {
				t.Fatal(err)
			}
			p := res.GetIdp()
			if res.GetClientSecret() != secret || p.GetId() != idp || p.GetOrgId() != e.OrgID || p.GetName() != "Zeta" ||
				p.GetStylingType() != directoryv1.StylingType_STYLING_TYPE_VENDOR || p.GetIssuer() != "https://idp.example.com/Zeta" ||
				p.GetClientId() != "client-Zeta" || !slices.Equal(p.GetScopes(), []string{"openid", "email", "profile"}) ||
				p.GetDisplayNameMapping() != directoryv1.MappingField_MAPPING_FIELD_EMAIL ||
				p.GetUsernameMapping() != directoryv1.MappingField_MAPPING_FIELD_PREFERRED_USERNAME || !p.GetAutoRegister() || !p.GetActive() {
				t.Fatalf("GetIdP = %v", res)
			}
			res, err = c.GetIdP(ctx, &directoryv1.GetIdPRequest{OrgId: e.OrgID, IdpId: inactive})
			if err != nil || res.GetIdp().GetActive() || res.GetClientSecret() != "inactive-secret" {
				t.Fatalf("GetIdP of an inactive IdP = %v, %v; want it, inactive", res, err)
			}
			for name, tc := range map[string]struct {
				req  *directoryv1.GetIdPRequest
				want connect.Code
			}{
				"another org's IdP": {&directoryv1.GetIdPRequest{OrgId: e.OrgID, IdpId: foreignIdP}, connect.CodeNotFound},
				"under another org": {&directoryv1.GetIdPRequest{OrgId: otherOrg, IdpId: idp}, connect.CodeNotFound},
				"unknown id":        {&directoryv1.GetIdPRequest{OrgId: e.OrgID, IdpId: "404"}, connect.CodeNotFound},
				"no org":            {&directoryv1.GetIdPRequest{IdpId: idp}, connect.CodeInvalidArgument},
				"no id":             {&directoryv1.GetIdPRequest{OrgId: e.OrgID}, connect.CodeInvalidArgument},
			} {
				if _, err := c.GetIdP(ctx, tc.req); connect.CodeOf(err) != tc.want {
					t.Errorf("%s: %v; want %v", name, err, tc.want)
				}
			}
		})

		t.Run("ListIdPs lists active IdPs without secrets", func(t *testing.T) {
			res, err := c.ListIdPs(ctx, &directoryv1.ListIdPsRequest{OrgId: e.OrgID})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, p := range res.GetIdps() {
				ids = append(ids, p.GetId())
				if !p.GetActive() || p.GetOrgId() != e.OrgID {
					t.Errorf("listed %v", p)
				}
			}
			if !slices.Equal(ids, []string{second, idp}) { // Alpha, Zeta; Mu is inactive
				t.Fatalf("listed %v; want [%s %s] (by name, active only)", ids, second, idp)
			}
			bin, _ := proto.Marshal(res)
			for _, s := range []string{secret, "second-secret", "inactive-secret"} {
				if bytes.Contains(bin, []byte(s)) {
					t.Fatal("the list carries a client secret")
				}
			}
			res, err = c.ListIdPs(ctx, &directoryv1.ListIdPsRequest{OrgId: otherOrg})
			if err != nil || len(res.GetIdps()) != 1 || res.GetIdps()[0].GetId() != foreignIdP {
				t.Fatalf("other org's list = %v, %v", res, err)
			}
			if _, err := c.ListIdPs(ctx, &directoryv1.ListIdPsRequest{OrgId: "404"}); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("unknown org: %v; want NotFound", err)
			}
			if _, err := c.ListIdPs(ctx, &directoryv1.ListIdPsRequest{}); connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("no org: %v; want InvalidArgument", err)
			}
		})

		t.Run("link, get, unlink", func(t *testing.T) {
			linda := e.SeedUser(e.OrgID, "linda")
			lars := e.SeedUser(e.OrgID, "lars")
			if err := link(c, idp, "sub-linda", linda); err != nil {
				t.Fatalf("LinkExternalUser: %v", err)
			}
			evs := e.Events(linda)
			last := evs[len(evs)-1]
			var payload users.IdPLink
			if err := json.Unmarshal(last.Payload, &payload); err != nil || last.Type != users.EventIdPLinkAdded ||
				payload != (users.IdPLink{IdPID: idp, ExternalSubject: "sub-linda", Issuer: issuerOf(idp), ClientID: "client-Zeta"}) || last.ResourceOwner != e.OrgID || last.Editor != linda {
				t.Fatalf("link event %+v (%s)", last, last.Payload)
			}
			// The user projection records the link like any user event.
			u, err := (&users.Queries{DB: e.DB}).Get(ctx, linda)
			if err != nil || u.Version != uint64(len(evs)) || u.Sequence != last.Sequence || !u.ChangeDate.Equal(last.CreatedAt) ||
				!u.CreationDate.Equal(evs[0].CreatedAt) {
				t.Fatalf("user after link %+v, %v; want version %d, sequence %d", u, err, len(evs), last.Sequence)
			}
			l, err := (&users.Queries{DB: e.DB}).Link(ctx, idp, "sub-linda")
			if err != nil || l.UserID != linda || l.OrgID != e.OrgID || l.Sequence != last.Sequence ||
				!l.CreationDate.Equal(last.CreatedAt) || !l.ChangeDate.Equal(last.CreatedAt) {
				t.Fatalf("stored link %+v, %v", l, err)
			}
			got, err := linked(c, idp, "sub-linda")
			if err != nil || got.GetId() != linda || got.GetState() != directoryv1.UserState_USER_STATE_ACTIVE ||
				got.GetPreferredLoginName() != "linda@acme-corp.localhost" {
				t.Fatalf("GetLinkedUser = %v, %v", got, err)
			}
			// The same subject at another IdP is another identity.
			if err := link(c, second, "sub-linda", linda); err != nil {
				t.Fatalf("link to a second IdP: %v", err)
			}
			// A subject at its 255-character bound.
			long := strings.Repeat("s", users.MaxExternalSubjectLength)
			if err := link(c, idp, long, lars); err != nil {
				t.Fatalf("255-character subject: %v", err)
			}
			if got, err := linked(c, idp, long); err != nil || got.GetId() != lars {
				t.Fatalf("GetLinkedUser of the long subject = %v, %v", got, err)
			}

			r := e.REST("POST", "/management/v1/users/machine", e.AdminToken, "", map[string]any{"userName": "robot", "name": "Robot"})
			robot, _ := r.JSON["userId"].(string)
			if r.Status != 200 {
				t.Fatalf("add machine user: %d %s", r.Status, r.Body)
			}
			mona := e.SeedUser(e.OrgID, "mona")
			before := e.EventCount()
			refusals(t, e, map[string]refusal{
				"identity linked to another user":  {link(c, idp, "sub-linda", mona), connect.CodeAlreadyExists},
				"identity linked to the same user": {link(c, idp, "sub-linda", linda), connect.CodeAlreadyExists},
				"user already linked to the IdP":   {link(c, idp, "sub-other", linda), connect.CodeAlreadyExists},
				"unknown IdP":                      {link(c, "404", "sub-x", mona), connect.CodeNotFound},
				"unknown user":                     {link(c, idp, "sub-x", "404"), connect.CodeNotFound},
				"inactive IdP":                     {link(c, inactive, "sub-x", mona), connect.CodeFailedPrecondition},
				"user of another org":              {link(c, idp, "sub-x", otherOwner), connect.CodeFailedPrecondition},
				"IdP of another org":               {link(c, foreignIdP, "sub-x", mona), connect.CodeFailedPrecondition},
				"machine user":                     {link(c, idp, "sub-x", robot), connect.CodeFailedPrecondition},
				"subject one past its bound":       {link(c, idp, long+"s", mona), connect.CodeInvalidArgument},
				"empty subject":                    {link(c, idp, "", mona), connect.CodeInvalidArgument},
				"blank subject":                    {link(c, idp, "  ", mona), connect.CodeInvalidArgument},
				"no user":                          {link(c, idp, "sub-x", ""), connect.CodeInvalidArgument},
				"no IdP":                           {link(c, "", "sub-x", mona), connect.CodeInvalidArgument},
				"get: nothing linked":              {errOf(linked(c, idp, "sub-x")), connect.CodeNotFound},
				"get: unknown IdP":                 {errOf(linked(c, "404", "sub-linda")), connect.CodeNotFound},
				"get: inactive IdP":                {errOf(linked(c, inactive, "sub-linda")), connect.CodeFailedPrecondition},
				"get: empty subject":               {errOf(linked(c, idp, "")), connect.CodeInvalidArgument},
				"unlink: nothing linked":           {unlink(c, idp, "sub-x"), connect.CodeNotFound},
				"unlink: unknown IdP":              {unlink(c, "404", "sub-linda"), connect.CodeNotFound},
				"unlink: empty subject":            {unlink(c, idp, ""), connect.CodeInvalidArgument},
			}, before)

			if err := unlink(c, idp, "sub-linda"); err != nil {
				t.Fatalf("UnlinkExternalUser: %v", err)
			}
			evs = e.Events(linda)
			last = evs[len(evs)-1]
			if err := json.Unmarshal(last.Payload, &payload); err != nil || last.Type != users.EventIdPLinkRemoved ||
				payload != (users.IdPLink{IdPID: idp, ExternalSubject: "sub-linda", Issuer: issuerOf(idp), ClientID: "client-Zeta"}) {
				t.Fatalf("unlink event %+v (%s)", last, last.Payload)
			}
			if u, _ := (&users.Queries{DB: e.DB}).Get(ctx, linda); u.Version != uint64(len(evs)) || u.Sequence != last.Sequence {
				t.Fatalf("user after unlink: version %d, sequence %d; want %d, %d", u.Version, u.Sequence, len(evs), last.Sequence)
			}
			if _, err := linked(c, idp, "sub-linda"); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("GetLinkedUser after unlink: %v; want NotFound", err)
			}
			if err := unlink(c, idp, "sub-linda"); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("second unlink: %v; want NotFound", err)
			}
			// The link to the other IdP stays; the freed identity can be linked
			// to someone else, and linda can link another identity.
			if got, err := linked(c, second, "sub-linda"); err != nil || got.GetId() != linda {
				t.Fatalf("link to the second IdP after unlink = %v, %v", got, err)
			}
			if err := link(c, idp, "sub-linda", mona); err != nil {
				t.Fatalf("relink the freed identity: %v", err)
			}
			if err := link(c, idp, "sub-linda-2", linda); err != nil {
				t.Fatalf("link linda to a new identity: %v", err)
			}
		})

		t.Run("RegisterExternalUser", func(t *testing.T) {
			erin, err := registerExternal(c, idp, "sub-erin", "erin")
			if err != nil {
				t.Fatalf("RegisterExternalUser: %v", err)
			}
			if erin.GetState() != directoryv1.UserState_USER_STATE_ACTIVE || erin.GetOrgId() != e.OrgID ||
				erin.GetPreferredLoginName() != "erin@acme-corp.localhost" || erin.GetEmail() != "erin@idp.example.com" ||
				erin.GetDisplayName() != "Ext Ern" || erin.GetPreferredLanguage() != "de" || erin.GetMachine() {
				t.Fatalf("registered %v", erin)
			}
			// One push: the user's two events share the timestamp and follow
			// each other.
			evs := e.Events(erin.GetId())
			if len(evs) != 2 || evs[0].Type != users.EventHumanAdded || evs[1].Type != users.EventIdPLinkAdded ||
				evs[1].Sequence != evs[0].Sequence+1 || !evs[0].CreatedAt.Equal(evs[1].CreatedAt) ||
				evs[0].ResourceOwner != e.OrgID || evs[1].ResourceOwner != e.OrgID {
				t.Fatalf("events %+v; want user and link added in one push", evs)
			}
			var added users.HumanAdded
			if err := json.Unmarshal(evs[0].Payload, &added); err != nil || !added.External || added.PasswordHash != "" || !added.EmailVerified {
				t.Fatalf("human added payload %s", evs[0].Payload)
			}
			if got, err := linked(c, idp, "sub-erin"); err != nil || got.GetId() != erin.GetId() {
				t.Fatalf("GetLinkedUser = %v, %v", got, err)
			}
			// Active for the management API too, and without a password.
			r := e.REST("GET", "/management/v1/users/"+erin.GetId(), e.AdminToken, "", nil)
			if u, _ := r.JSON["user"].(map[string]any); r.Status != 200 || u["state"] != "USER_STATE_ACTIVE" {
				t.Fatalf("management view: %d %s", r.Status, r.Body)
			}
			if _, err := verify(c, e.OrgID, "erin", "", ""); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("password login of an external user: %v; want Unauthenticated", err)
			}

			// In another organization's IdP, the user belongs to that org.
			fred, err := registerExternal(c, foreignIdP, "sub-erin", "erin")
			if err != nil || fred.GetOrgId() != otherOrg {
				t.Fatalf("registration through the other org's IdP = %v, %v", fred, err)
			}

			reg := func(mod func(r *directoryv1.RegisterExternalUserRequest)) error {
				r := &directoryv1.RegisterExternalUserRequest{IdpId: idp, ExternalSubject: "sub-new", UserName: "newbie",
					FirstName: "N", LastName: "B", Email: "newbie@example.com"}
				mod(r)
				r.Issuer = issuerOf(r.IdpId)
				_, err := c.RegisterExternalUser(ctx, r)
				return err
			}
			// Limits at their bounds.
			name200 := strings.Repeat("n", 200)
			if err := reg(func(r *directoryv1.RegisterExternalUserRequest) {
				r.ExternalSubject, r.UserName, r.FirstName, r.LastName = strings.Repeat("x", users.MaxExternalSubjectLength), name200, name200, name200
				r.Email, r.PreferredLanguage = strings.Repeat("e", 188)+"@example.com", strings.Repeat("l", 10)
			}); err != nil {
				t.Fatalf("every field at its bound: %v", err)
			}
			before := e.EventCount()
			refusals(t, e, map[string]refusal{
				"identity already linked":       {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.ExternalSubject = "sub-erin" }), connect.CodeAlreadyExists},
				"user name taken":               {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.UserName = "erin" }), connect.CodeAlreadyExists},
				"inactive IdP":                  {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.IdpId = inactive }), connect.CodeFailedPrecondition},
				"unknown IdP":                   {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.IdpId = "404" }), connect.CodeNotFound},
				"user name one past its bound":  {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.UserName = name200 + "n" }), connect.CodeInvalidArgument},
				"user name with a space":        {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.UserName = "new bie" }), connect.CodeInvalidArgument},
				"first name one past its bound": {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.FirstName = name200 + "n" }), connect.CodeInvalidArgument},
				"no last name":                  {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.LastName = "" }), connect.CodeInvalidArgument},
				"no email":                      {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.Email = "" }), connect.CodeInvalidArgument},
				"bad email":                     {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.Email = "Newbie <n@example.com>" }), connect.CodeInvalidArgument},
				"language one past its bound":   {reg(func(r *directoryv1.RegisterExternalUserRequest) { r.PreferredLanguage = strings.Repeat("l", 11) }), connect.CodeInvalidArgument},
				"subject one past its bound": {reg(func(r *directoryv1.RegisterExternalUserRequest) {
					r.ExternalSubject = strings.Repeat("x", users.MaxExternalSubjectLength+1)
				}), connect.CodeInvalidArgument},
			}, before)
			// The refusal for the taken name did not leave a link behind.
			if _, err := linked(c, idp, "sub-new"); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("GetLinkedUser after refused registrations: %v; want NotFound", err)
			}
			// Every bad field is named at once.
			err = reg(func(r *directoryv1.RegisterExternalUserRequest) { r.UserName, r.FirstName, r.Email = "", "", "x" })
			for _, f := range []string{"user_name", "first_name", "email"} {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
		})

		t.Run("removing the user removes its links", func(t *testing.T) {
			gone, err := registerExternal(c, idp, "sub-gone", "gone")
			if err != nil {
				t.Fatal(err)
			}
			if err := link(c, second, "sub-gone-2", gone.GetId()); err != nil {
				t.Fatal(err)
			}
			restOK(t, e, "DELETE", "/management/v1/users/"+gone.GetId(), "", nil)
			if n := linkCount(t, e, "user_id", gone.GetId()); n != 0 {
				t.Fatalf("%d links of the removed user remain", n)
			}
			if _, err := linked(c, idp, "sub-gone"); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("GetLinkedUser of a removed user: %v; want NotFound", err)
			}
			// The identity is free for another user.
			if _, err := registerExternal(c, idp, "sub-gone", "gone-again"); err != nil {
				t.Fatalf("register the freed identity: %v", err)
			}
		})

		t.Run("removing the IdP removes its links", func(t *testing.T) {
			doomed := addIdP(t, e, "", "Doomed", "doomed-secret")
			ida := e.SeedUser(e.OrgID, "ida")
			if err := link(c, doomed, "sub-ida", ida); err != nil {
				t.Fatal(err)
			}
			if err := link(c, idp, "sub-ida", ida); err != nil {
				t.Fatal(err)
			}
			if _, err := registerExternal(c, doomed, "sub-ivo", "ivo"); err != nil {
				t.Fatal(err)
			}
			if n := linkCount(t, e, "idp_id", doomed); n != 2 {
				t.Fatalf("%d links of the IdP; want 2", n)
			}
			restOK(t, e, "DELETE", "/management/v1/idps/"+doomed, "", nil)
			if n := linkCount(t, e, "idp_id", doomed); n != 0 {
				t.Fatalf("%d links of the removed IdP remain", n)
			}
			if _, err := linked(c, doomed, "sub-ida"); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("GetLinkedUser through a removed IdP: %v; want NotFound", err)
			}
			// The users and their other links stay.
			if got, err := linked(c, idp, "sub-ida"); err != nil || got.GetId() != ida {
				t.Fatalf("ida's other link = %v, %v", got, err)
			}
			if _, err := c.LookupUser(ctx, &directoryv1.LookupUserRequest{OrgId: e.OrgID, LoginName: "ivo"}); err != nil {
				t.Fatalf("the IdP's registered user is gone: %v", err)
			}
		})

		t.Run("restart keeps links and secrets", func(t *testing.T) {
			e.Restart()
			c := e.Internal(mgmttest.InternalToken)
			if got, err := linked(c, idp, "sub-erin"); err != nil || got.GetState() != directoryv1.UserState_USER_STATE_ACTIVE {
				t.Fatalf("GetLinkedUser after restart = %v, %v", got, err)
			}
			res, err := c.GetIdP(ctx, &directoryv1.GetIdPRequest{OrgId: e.OrgID, IdpId: idp})
			if err != nil || res.GetClientSecret() != secret {
				t.Fatalf("GetIdP after restart: %v", err)
			}
		})
	})
}

func errOf(_ *directoryv1.User, err error) error { return err }

// ConfirmLinkedEmail: an untrusted provider's assertion is the
// organization's word, a trusted one's proof; another address, another
// user's verified address and an unknown identity change nothing.
func TestConfirmLinkedEmail(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		c := e.Internal(mgmttest.InternalToken)
		ctx := context.Background()
		idp := addIdP(t, e, "", "confirm", "s3cret")
		carl, other := e.SeedUser(e.OrgID, "carl"), e.SeedUser(e.OrgID, "other")
		if err := link(c, idp, "carl-sub", carl); err != nil {
			t.Fatal(err)
		}
		confirm := func(email string) (bool, error) {
			res, err := c.ConfirmLinkedEmail(ctx, &directoryv1.ConfirmLinkedEmailRequest{IdpId: idp, ExternalSubject: "carl-sub",
				Issuer: issuerOf(idp), Email: email})
			return res.GetVerified(), err
		}
		stored := func(id string) (v, p bool) {
			t.Helper()
			var row struct {
				V bool `db:"email_verified"`
				P bool `db:"email_proven"`
			}
			if err := e.DB.Get(ctx, &row, `SELECT email_verified, email_proven FROM users WHERE id = ?`, id); err != nil {
				t.Fatal(err)
			}
			return row.V, row.P
		}
		if ok, err := confirm("someone@else.test"); err != nil || ok {
			t.Fatalf("another address: %v, %v", ok, err)
		}
		if ok, err := confirm("CARL@example.com"); err != nil || !ok {
			t.Fatalf("the user's address: %v, %v", ok, err)
		}
		if v, p := stored(carl); !v || p {
			t.Fatalf("untrusted provider: verified %v proven %v; want the organization's word", v, p)
		}
		restOK(t, e, "POST", "/management/v1/idps/"+idp+"/_trust", "", map[string]any{"trustAmr": true})
		if ok, err := confirm("carl@example.com"); err != nil || !ok {
			t.Fatalf("trusted: %v, %v", ok, err)
		}
		if v, p := stored(carl); !v || !p {
			t.Fatalf("trusted provider: verified %v proven %v; want proof", v, p)
		}
		// Another user's verified address stays that user's.
		restOK(t, e, "PUT", "/management/v1/users/"+other+"/email", "", map[string]any{"email": "shared@example.com", "isEmailVerified": true})
		restOK(t, e, "PUT", "/management/v1/users/"+carl+"/email", "", map[string]any{"email": "shared@example.com"})
		if ok, err := confirm("shared@example.com"); err != nil || ok {
			t.Fatalf("another user's verified address: %v, %v", ok, err)
		}
		if _, err := c.ConfirmLinkedEmail(ctx, &directoryv1.ConfirmLinkedEmailRequest{IdpId: idp, ExternalSubject: "nobody",
			Issuer: issuerOf(idp), Email: "carl@example.com"}); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("an unknown identity: %v", err)
		}
	})
}
