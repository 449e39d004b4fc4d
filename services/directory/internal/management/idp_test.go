package management_test

//lint:file-ignore SA1019 the deprecated OIDC provider RPCs are part of the interface (ZITADEL compatibility); this file calls them on purpose.

import (
	"context"
	"slices"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// Every IdP RPC over Connect, gRPC and gRPC-web: details against the event
// table, the read form, state changes, removal and errors.
func TestIDPOverEveryProtocol(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		for _, protocol := range mgmttest.Protocols {
			t.Run(protocol, func(t *testing.T) {
				c := e.Client(protocol, e.AdminToken, "")
				secret1, secret2 := "first-secret-"+protocol, "second-secret-"+protocol
				add, err := c.AddOrgOIDCIDP(ctx, &managementv1.AddOrgOIDCIDPRequest{
					Name: "Acme " + protocol, StylingType: managementv1.StylingType_STYLING_TYPE_VENDOR,
					ClientId: "gatehouse", ClientSecret: secret1, Issuer: "https://login.example.com/" + protocol,
					Scopes:             []string{"email", "profile"},
					DisplayNameMapping: managementv1.OIDCMappingField_OIDC_MAPPING_FIELD_EMAIL,
					UsernameMapping:    managementv1.OIDCMappingField_OIDC_MAPPING_FIELD_PREFERRED_USERNAME,
					AutoRegister:       true,
				})
				if err != nil {
					t.Fatalf("AddOrgOIDCIDP: %v", err)
				}
				id := add.GetIdpId()
				evs := idpEvents(t, e, id, 1)
				idpWantDetails(t, "add", add.GetDetails(), evs[0], evs[0])
				idpNoSecretIn(t, "add", add, secret1)

				got, err := c.GetOrgIDPByID(ctx, &managementv1.GetOrgIDPByIDRequest{Id: id})
				if err != nil {
					t.Fatalf("GetOrgIDPByID: %v", err)
				}
				p := got.GetIdp()
				oc := p.GetOidcConfig()
				if p.GetId() != id || p.GetName() != "Acme "+protocol || p.GetState() != managementv1.IDPState_IDP_STATE_ACTIVE ||
					p.GetStylingType() != managementv1.StylingType_STYLING_TYPE_VENDOR || p.GetOwner() != managementv1.IDPOwnerType_IDP_OWNER_TYPE_ORG ||
					!p.GetAutoRegister() || oc.GetClientId() != "gatehouse" || oc.GetIssuer() != "https://login.example.com/"+protocol ||
					!slices.Equal(oc.GetScopes(), []string{"email", "profile"}) ||
					oc.GetDisplayNameMapping() != managementv1.OIDCMappingField_OIDC_MAPPING_FIELD_EMAIL ||
					oc.GetUsernameMapping() != managementv1.OIDCMappingField_OIDC_MAPPING_FIELD_PREFERRED_USERNAME {
					t.Fatalf("read form = %v", p)
				}
				idpWantDetails(t, "get", p.GetDetails(), evs[0], evs[0])
				idpNoSecretIn(t, "get", got, secret1)

				upd, err := c.UpdateOrgIDPOIDCConfig(ctx, &managementv1.UpdateOrgIDPOIDCConfigRequest{
					IdpId: id, ClientId: "gatehouse-2", ClientSecret: secret2, Issuer: "https://login.example.com/" + protocol,
				})
				if err != nil {
					t.Fatalf("UpdateOrgIDPOIDCConfig: %v", err)
				}
				evs = idpEvents(t, e, id, 2)
				idpWantDetails(t, "update", upd.GetDetails(), evs[1], evs[1])
				if s := idpStoredSecret(t, e, e.OrgID, id); s != secret2 {
					t.Fatal("the new client secret was not stored")
				}

				list, err := c.ListOrgIDPs(ctx, &managementv1.ListOrgIDPsRequest{Queries: []*managementv1.IDPQuery{
					{Query: &managementv1.IDPQuery_IdpIdQuery{IdpIdQuery: &managementv1.IDPIDQuery{Id: id}}},
				}})
				if err != nil {
					t.Fatalf("ListOrgIDPs: %v", err)
				}
				if list.GetDetails().GetTotalResult() != 1 || len(list.GetResult()) != 1 ||
					list.GetDetails().GetProcessedSequence() != evs[1].Sequence ||
					!list.GetDetails().GetViewTimestamp().AsTime().Equal(evs[1].CreatedAt) {
					t.Fatalf("list = %v; want the one IdP, processed up to its last event", list)
				}
				// The update replaced everything: scopes and mappings are empty now.
				lp := list.GetResult()[0]
				if lc := lp.GetOidcConfig(); lc.GetClientId() != "gatehouse-2" || len(lc.GetScopes()) != 0 ||
					lc.GetDisplayNameMapping() != 0 || lc.GetUsernameMapping() != 0 || lp.GetName() != "Acme "+protocol || !lp.GetAutoRegister() {
					t.Fatalf("after update: %v", lp)
				}
				idpWantDetails(t, "list", lp.GetDetails(), evs[0], evs[1])
				idpNoSecretIn(t, "list", list, secret1, secret2)

				deact, err := c.DeactivateOrgIDP(ctx, &managementv1.DeactivateOrgIDPRequest{IdpId: id})
				if err != nil {
					t.Fatalf("DeactivateOrgIDP: %v", err)
				}
				evs = idpEvents(t, e, id, 3)
				idpWantDetails(t, "deactivate", deact.GetDetails(), evs[2], evs[2])
				_, err = c.DeactivateOrgIDP(ctx, &managementv1.DeactivateOrgIDPRequest{IdpId: id})
				if connect.CodeOf(err) != connect.CodeAborted {
					t.Fatalf("second deactivation: %v; want Aborted", err)
				}
				got, _ = c.GetOrgIDPByID(ctx, &managementv1.GetOrgIDPByIDRequest{Id: id})
				if got.GetIdp().GetState() != managementv1.IDPState_IDP_STATE_INACTIVE {
					t.Fatalf("state after deactivation: %v", got.GetIdp().GetState())
				}
				idpWantDetails(t, "get inactive", got.GetIdp().GetDetails(), evs[0], evs[2])

				react, err := c.ReactivateOrgIDP(ctx, &managementv1.ReactivateOrgIDPRequest{IdpId: id})
				if err != nil {
					t.Fatalf("ReactivateOrgIDP: %v", err)
				}
				evs = idpEvents(t, e, id, 4)
				idpWantDetails(t, "reactivate", react.GetDetails(), evs[3], evs[3])
				_, err = c.ReactivateOrgIDP(ctx, &managementv1.ReactivateOrgIDPRequest{IdpId: id})
				if connect.CodeOf(err) != connect.CodeAborted {
					t.Fatalf("second reactivation: %v; want Aborted", err)
				}

				// Refused requests: each with its code, none adds an event.
				before := e.EventCount()
				for name, call := range map[string]struct {
					err  error
					want connect.Code
				}{
					"update without changes": {idpErr(c.UpdateOrgIDPOIDCConfig(ctx, &managementv1.UpdateOrgIDPOIDCConfigRequest{
						IdpId: id, ClientId: "gatehouse-2", Issuer: "https://login.example.com/" + protocol, ClientSecret: secret2,
					})), connect.CodeAborted},
					"update of an unknown IdP": {idpErr(c.UpdateOrgIDPOIDCConfig(ctx, &managementv1.UpdateOrgIDPOIDCConfigRequest{
						IdpId: "404", ClientId: "x", Issuer: "https://x.example.com",
					})), connect.CodeNotFound},
					"add with an undefined styling type": {idpErr(c.AddOrgOIDCIDP(ctx, &managementv1.AddOrgOIDCIDPRequest{
						Name: "x", ClientId: "x", ClientSecret: "x", Issuer: "https://x.example.com", StylingType: 99,
					})), connect.CodeInvalidArgument},
					"update with an undefined mapping": {idpErr(c.UpdateOrgIDPOIDCConfig(ctx, &managementv1.UpdateOrgIDPOIDCConfigRequest{
						IdpId: id, ClientId: "x", Issuer: "https://x.example.com", UsernameMapping: 7,
					})), connect.CodeInvalidArgument},
					"duplicate name": {idpErr(c.AddOrgOIDCIDP(ctx, &managementv1.AddOrgOIDCIDPRequest{
						Name: "Acme " + protocol, ClientId: "x", ClientSecret: "x", Issuer: "https://x.example.com",
					})), connect.CodeAlreadyExists},
					"list with an undefined owner type": {idpErr(c.ListOrgIDPs(ctx, &managementv1.ListOrgIDPsRequest{Queries: []*managementv1.IDPQuery{
						{Query: &managementv1.IDPQuery_OwnerTypeQuery{OwnerTypeQuery: &managementv1.IDPOwnerTypeQuery{OwnerType: 5}}},
					}})), connect.CodeInvalidArgument},
					"get without id": {idpErr(c.GetOrgIDPByID(ctx, &managementv1.GetOrgIDPByIDRequest{})), connect.CodeInvalidArgument},
				} {
					if connect.CodeOf(call.err) != call.want {
						t.Errorf("%s: %v; want %v", name, call.err, call.want)
					}
				}
				if after := e.EventCount(); after != before {
					t.Fatalf("refused requests added %d events", after-before)
				}

				rm, err := c.RemoveOrgIDP(ctx, &managementv1.RemoveOrgIDPRequest{IdpId: id})
				if err != nil {
					t.Fatalf("RemoveOrgIDP: %v", err)
				}
				evs = idpEvents(t, e, id, 5)
				idpWantDetails(t, "remove", rm.GetDetails(), evs[4], evs[4])
				if _, err := c.GetOrgIDPByID(ctx, &managementv1.GetOrgIDPByIDRequest{Id: id}); connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("get after removal: %v; want NotFound", err)
				}
				if _, err := c.RemoveOrgIDP(ctx, &managementv1.RemoveOrgIDPRequest{IdpId: id}); connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("second removal: %v; want NotFound", err)
				}
				if _, err := c.ReactivateOrgIDP(ctx, &managementv1.ReactivateOrgIDPRequest{IdpId: id}); connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("reactivate after removal: %v; want NotFound", err)
				}
				idpNoPlaintext(t, e, secret1, secret2)
			})
		}
	})
}

func idpErr[T any](_ T, err error) error { return err }

// Roles and organizations: IdP RPCs need ORG_OWNER (or IAM_OWNER) in the
// target organization; another organization's IdPs are NotFound without
// x-service-orgid, reachable with it where the caller holds a role.
func TestIDPAccess(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		otherOrg, otherOwner := e.SeedOrg("Other Org", "owner2")
		manager := e.SeedUser(e.OrgID, "manager")
		e.SeedMember(e.OrgID, manager, "ORG_USER_MANAGER")
		plain := e.SeedUser(e.OrgID, "plain")
		ownToken, otherToken := e.Intro.Mint(manager), e.Intro.Mint(otherOwner)

		body := func(name string) map[string]any {
			return map[string]any{"name": name, "clientId": "c", "clientSecret": "s", "issuer": "https://idp.example.com"}
		}
		r := e.REST("POST", "/management/v1/idps/oidc", e.AdminToken, "", body("Ours"))
		if r.Status != 200 {
			t.Fatalf("add: %d %s", r.Status, r.Body)
		}
		ours := idpStr(r.JSON["idpId"])
		r = e.REST("POST", "/management/v1/idps/oidc", otherToken, "", body("Theirs"))
		if r.Status != 200 {
			t.Fatalf("add by the other org's owner: %d %s", r.Status, r.Body)
		}
		theirs := idpStr(r.JSON["idpId"])
		if ev := e.Events(theirs); len(ev) != 1 || ev[0].ResourceOwner != otherOrg || idpObj(r.JSON["details"])["resourceOwner"] != otherOrg {
			t.Fatalf("the other owner's IdP belongs to %v; want %s", r.JSON["details"], otherOrg)
		}
		update := map[string]any{"clientId": "c2", "clientSecret": "s2", "issuer": "https://idp.example.com"}

		before := e.EventCount()
		cases := []struct {
			name, method, path, token, org string
			body                           any
			status                         int
		}{
			{"no token", "GET", "/management/v1/idps/" + ours, "", "", nil, 401},
			{"user manager cannot read", "GET", "/management/v1/idps/" + ours, ownToken, "", nil, 403},
			{"user manager cannot list", "POST", "/management/v1/idps/_search", ownToken, "", map[string]any{}, 403},
			{"user manager cannot add", "POST", "/management/v1/idps/oidc", ownToken, "", body("Mine"), 403},
			{"user manager cannot update", "PUT", "/management/v1/idps/" + ours + "/oidc_config", ownToken, "", update, 403},
			{"user manager cannot deactivate", "POST", "/management/v1/idps/" + ours + "/_deactivate", ownToken, "", map[string]any{}, 403},
			{"user manager cannot remove", "DELETE", "/management/v1/idps/" + ours, ownToken, "", nil, 403},
			{"no role cannot update", "PUT", "/management/v1/idps/" + ours + "/oidc_config", e.Intro.Mint(plain), "", update, 403},
			{"other org's owner cannot reach ours", "PUT", "/management/v1/idps/" + ours + "/oidc_config", otherToken, e.OrgID, update, 403},
			{"other org's IdP without header is 404 (get)", "GET", "/management/v1/idps/" + theirs, e.AdminToken, "", nil, 404},
			{"other org's IdP without header is 404 (update)", "PUT", "/management/v1/idps/" + theirs + "/oidc_config", e.AdminToken, "", update, 404},
			{"other org's IdP without header is 404 (deactivate)", "POST", "/management/v1/idps/" + theirs + "/_deactivate", e.AdminToken, "", map[string]any{}, 404},
			{"other org's IdP without header is 404 (reactivate)", "POST", "/management/v1/idps/" + theirs + "/_reactivate", e.AdminToken, "", map[string]any{}, 404},
			{"other org's IdP without header is 404 (remove)", "DELETE", "/management/v1/idps/" + theirs, e.AdminToken, "", nil, 404},
			{"ours is 404 to the other owner", "GET", "/management/v1/idps/" + ours, otherToken, "", nil, 404},
		}
		for _, tc := range cases {
			r := e.REST(tc.method, tc.path, tc.token, tc.org, tc.body)
			if r.Status != tc.status {
				t.Errorf("%s: %d %s; want %d", tc.name, r.Status, r.Body, tc.status)
			}
		}
		if after := e.EventCount(); after != before {
			t.Fatalf("refused requests added %d events", after-before)
		}
		// The same refusals over gRPC-web.
		_, err := e.Client("grpc-web", ownToken, "").UpdateOrgIDPOIDCConfig(ctx, &managementv1.UpdateOrgIDPOIDCConfigRequest{
			IdpId: ours, ClientId: "c2", Issuer: "https://idp.example.com"})
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Fatalf("user manager update over gRPC-web: %v; want PermissionDenied", err)
		}
		_, err = e.Client("grpc", e.AdminToken, "").GetOrgIDPByID(ctx, &managementv1.GetOrgIDPByIDRequest{Id: theirs})
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("other org's IdP over gRPC: %v; want NotFound", err)
		}

		// With x-service-orgid the IAM_OWNER reaches the other org's IdP.
		r = e.REST("PUT", "/management/v1/idps/"+theirs+"/oidc_config", e.AdminToken, otherOrg, update)
		if r.Status != 200 || idpObj(r.JSON["details"])["resourceOwner"] != otherOrg {
			t.Fatalf("IAM_OWNER update with x-service-orgid: %d %s", r.Status, r.Body)
		}
		r = e.REST("POST", "/management/v1/idps/_search", e.AdminToken, otherOrg, map[string]any{})
		res, _ := r.JSON["result"].([]any)
		if r.Status != 200 || len(res) != 1 || idpObj(res[0])["id"] != theirs {
			t.Fatalf("list of the other org: %d %s", r.Status, r.Body)
		}
		r = e.REST("POST", "/management/v1/idps/_search", e.AdminToken, "", map[string]any{})
		res, _ = r.JSON["result"].([]any)
		if r.Status != 200 || len(res) != 1 || idpObj(res[0])["id"] != ours {
			t.Fatalf("list of our org: %d %s", r.Status, r.Body)
		}
		// Names are unique per organization only.
		if r := e.REST("POST", "/management/v1/idps/oidc", e.AdminToken, otherOrg, body("Ours")); r.Status != 200 {
			t.Fatalf("a name used in another org: %d %s", r.Status, r.Body)
		}
		if r := e.REST("POST", "/management/v1/idps/oidc", e.AdminToken, otherOrg, body("Ours")); r.Status != 409 || r.Code() != 6 {
			t.Fatalf("a name used in the same org: %d %s; want 409 AlreadyExists", r.Status, r.Body)
		}
	})
}
