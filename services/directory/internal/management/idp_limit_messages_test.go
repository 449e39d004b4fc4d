package management_test

import (
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// The configuration limits of AddOrgOIDCIDP and UpdateOrgIDPOIDCConfig are
// protovalidate rules in management.proto: a request past them gets the
// error the handlers' own checks gave before, word for word and in the
// same order among the other field problems (400, code 3, IDP-invalid).
func TestIDPLimitMessages(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		long := strings.Repeat
		base := map[string]any{"name": "Corp", "clientId": "client", "clientSecret": "secret", "issuer": "https://idp.example.com"}
		r := e.REST("POST", "/management/v1/idps/oidc", e.AdminToken, "", base)
		if r.Status != 200 {
			t.Fatalf("add: %d %s", r.Status, r.Body)
		}
		update := "/management/v1/idps/" + idpStr(r.JSON["idpId"]) + "/oidc_config"
		scopes := append(idpScopes(20), long("x", 201))
		for _, tc := range []struct {
			name, method, path string
			body               map[string]any
			msg                string
		}{
			{"add: name too long", "POST", "/management/v1/idps/oidc", idpWith(base, "name", long("n", 201)),
				"name must have 1 to 200 characters"},
			{"add: blank name", "POST", "/management/v1/idps/oidc", idpWith(base, "name", "  "),
				"name is required"},
			{"add: every limit", "POST", "/management/v1/idps/oidc", map[string]any{
				"name": long("n", 201), "clientId": long("c", 201), "clientSecret": long("s", 201),
				"issuer": idpIssuer(201), "scopes": scopes, "stylingType": 7},
				"name must have 1 to 200 characters; styling_type is not a defined value; client_id must have 1 to 200 characters; " +
					"issuer must have 1 to 200 characters; scopes must have at most 20 entries; scopes must have 1 to 200 characters; " +
					"client_secret must have 1 to 200 characters"},
			{"add: blank scope and long scope", "POST", "/management/v1/idps/oidc", idpWith(base, "scopes", []string{"", long("x", 201)}),
				"scopes is required; scopes must have 1 to 200 characters"},
			{"update: secret too long", "PUT", update, idpWith(base, "name", nil, "clientSecret", long("s", 201)),
				"client_secret must have 0 to 200 characters"},
			{"update: every limit", "PUT", update, map[string]any{
				"clientId": long("c", 201), "clientSecret": long("s", 201), "issuer": idpIssuer(201), "scopes": scopes},
				"client_id must have 1 to 200 characters; issuer must have 1 to 200 characters; scopes must have at most 20 entries; " +
					"scopes must have 1 to 200 characters; client_secret must have 0 to 200 characters"},
		} {
			r := e.REST(tc.method, tc.path, e.AdminToken, "", tc.body)
			if r.Status != 400 || r.Code() != 3 {
				t.Errorf("%s: %d %s; want 400, code 3", tc.name, r.Status, r.Body)
				continue
			}
			if id, _ := r.Detail(); id != "IDP-invalid" {
				t.Errorf("%s: detail %q; want IDP-invalid", tc.name, id)
			}
			if got := idpStr(r.JSON["message"]); got != tc.msg {
				t.Errorf("%s: message\n  %q\nwant\n  %q", tc.name, got, tc.msg)
			}
		}
	})
}
