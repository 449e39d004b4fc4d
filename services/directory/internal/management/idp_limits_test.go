package management_test

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// idpIssuer returns an https issuer of exactly n characters.
func idpIssuer(n int) string {
	const base = "https://idp.example.com/"
	return base + strings.Repeat("a", n-len(base))
}

func idpScopes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("scope%d", i)
	}
	return out
}

// idpWith returns a copy of base with the given fields set (a nil value
// deletes the field).
func idpWith(base map[string]any, kv ...any) map[string]any {
	out := maps.Clone(base)
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// The seed's and the proto's limits of AddOrgOIDCIDP over REST, each at its
// bound and one past; refused requests add no events.
func TestIDPAddLimits(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		base := map[string]any{"clientId": "client", "clientSecret": "secret", "issuer": "https://idp.example.com"}
		n := 0
		name := func() string { n++; return fmt.Sprintf("idp-%d", n) }
		long := func(c string, k int) string { return strings.Repeat(c, k) }
		cases := []struct {
			name     string
			body     any
			status   int
			detailID string
		}{
			{"minimal", idpWith(base, "name", name()), 200, ""},
			{"name of 200 characters", idpWith(base, "name", long("n", 200)), 200, ""},
			{"name of 200 multi-byte characters", idpWith(base, "name", long("ä", 200)), 200, ""},
			{"name of 201 characters", idpWith(base, "name", long("n", 201)), 400, "IDP-invalid"},
			{"no name", base, 400, "IDP-invalid"},
			{"blank name", idpWith(base, "name", "   "), 400, "IDP-invalid"},
			{"client id of 200 characters", idpWith(base, "name", name(), "clientId", long("c", 200)), 200, ""},
			{"client id of 201 characters", idpWith(base, "name", name(), "clientId", long("c", 201)), 400, "IDP-invalid"},
			{"no client id", idpWith(base, "name", name(), "clientId", nil), 400, "IDP-invalid"},
			{"client secret of 200 characters", idpWith(base, "name", name(), "clientSecret", long("s", 200)), 200, ""},
			{"client secret of 201 characters", idpWith(base, "name", name(), "clientSecret", long("s", 201)), 400, "IDP-invalid"},
			{"no client secret", idpWith(base, "name", name(), "clientSecret", ""), 400, "IDP-invalid"},
			{"issuer of 200 characters", idpWith(base, "name", name(), "issuer", idpIssuer(200)), 200, ""},
			{"issuer of 201 characters", idpWith(base, "name", name(), "issuer", idpIssuer(201)), 400, "IDP-invalid"},
			{"no issuer", idpWith(base, "name", name(), "issuer", nil), 400, "IDP-invalid"},
			{"relative issuer", idpWith(base, "name", name(), "issuer", "idp.example.com"), 400, "IDP-invalid"},
			{"http issuer", idpWith(base, "name", name(), "issuer", "http://idp.example.com"), 400, "IDP-invalid"},
			// Loopback addresses are refused unless GATEHOUSE_IDP_ALLOW_LOOPBACK
			// (TestIDPIssuerAddress); a name is checked when dialled.
			{"http issuer on 127.0.0.1", idpWith(base, "name", name(), "issuer", "http://127.0.0.1:9000/realms/test"), 400, "IDP-invalid"},
			{"http issuer on ::1", idpWith(base, "name", name(), "issuer", "http://[::1]:9000"), 400, "IDP-invalid"},
			{"http issuer on localhost", idpWith(base, "name", name(), "issuer", "http://localhost:9000"), 200, ""},
			{"issuer with a query", idpWith(base, "name", name(), "issuer", "https://idp.example.com/?tenant=a"), 400, "IDP-invalid"},
			{"20 scopes", idpWith(base, "name", name(), "scopes", idpScopes(20)), 200, ""},
			{"21 scopes", idpWith(base, "name", name(), "scopes", idpScopes(21)), 400, "IDP-invalid"},
			{"scope of 200 characters", idpWith(base, "name", name(), "scopes", []string{long("x", 200)}), 200, ""},
			{"scope of 201 characters", idpWith(base, "name", name(), "scopes", []string{long("x", 201)}), 400, "IDP-invalid"},
			{"empty scope", idpWith(base, "name", name(), "scopes", []string{"email", ""}), 400, "IDP-invalid"},
			{"scope with a space", idpWith(base, "name", name(), "scopes", []string{"email profile"}), 400, "IDP-invalid"},
			{"vendor styling and mappings", idpWith(base, "name", name(), "stylingType", "STYLING_TYPE_VENDOR",
				"displayNameMapping", "OIDC_MAPPING_FIELD_EMAIL", "usernameMapping", "OIDC_MAPPING_FIELD_PREFERRED_USERNAME"), 200, ""},
			{"undefined styling number", idpWith(base, "name", name(), "stylingType", 7), 400, "IDP-invalid"},
			{"undefined mapping number", idpWith(base, "name", name(), "displayNameMapping", 3), 400, "IDP-invalid"},
			{"malformed JSON", `{"name": "x",`, 400, ""},
			{"unknown field ignored", idpWith(base, "name", name(), "colour", "blue"), 200, ""},
			{"duplicate name", idpWith(base, "name", "idp-1"), 409, "IDP-name-taken"},
		}
		for _, tc := range cases {
			before := e.EventCount()
			r := e.REST("POST", "/management/v1/idps/oidc", e.AdminToken, "", tc.body)
			if r.Status != tc.status {
				t.Errorf("%s: status %d %s; want %d", tc.name, r.Status, r.Body, tc.status)
				continue
			}
			if tc.status != 200 {
				if after := e.EventCount(); after != before {
					t.Errorf("%s: refused request added %d events", tc.name, after-before)
				}
				if want := map[int]int{400: 3, 409: 6}[tc.status]; r.Code() != want {
					t.Errorf("%s: code %d; want %d", tc.name, r.Code(), want)
				}
			}
			if tc.detailID != "" {
				if id, typ := r.Detail(); id != tc.detailID || typ != "type.googleapis.com/gatehouse.management.v1.ErrorDetail" {
					t.Errorf("%s: detail %q %q; want %q ErrorDetail", tc.name, id, typ, tc.detailID)
				}
			}
			if tc.status == 200 {
				id := idpStr(r.JSON["idpId"])
				evs := idpEvents(t, e, id, 1)
				idpWantJSONDetails(t, tc.name, idpObj(r.JSON["details"]), evs[0], evs[0])
			}
		}
		// Every field problem is named in one error.
		r := e.REST("POST", "/management/v1/idps/oidc", e.AdminToken, "", map[string]any{"issuer": "http://idp.example.com"})
		msg := idpStr(r.JSON["message"])
		for _, f := range []string{"name", "client_id", "client_secret", "issuer"} {
			if !strings.Contains(msg, f+" ") {
				t.Errorf("error %q does not name %s", msg, f)
			}
		}
	})
}

// UpdateOrgIDPOIDCConfig over REST: every documented status (200, 400, 403,
// 404, 409), its limits, the replace-everything rule and the kept secret;
// then ListOrgIDPs' limits, the state changes and removal over REST, and
// that all of it survives a restart.
func TestIDPUpdateListAndRestart(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		const secret = "original-client-secret"
		r := e.REST("POST", "/management/v1/idps/oidc", e.AdminToken, "", map[string]any{
			"name": "Corp SSO", "stylingType": "STYLING_TYPE_VENDOR", "clientId": "client", "clientSecret": secret,
			"issuer": "https://sso.example.com", "scopes": []string{"email", "profile"}, "autoRegister": true,
			"displayNameMapping": "OIDC_MAPPING_FIELD_EMAIL", "usernameMapping": "OIDC_MAPPING_FIELD_EMAIL",
		})
		if r.Status != 200 {
			t.Fatalf("add: %d %s", r.Status, r.Body)
		}
		id := idpStr(r.JSON["idpId"])
		path := "/management/v1/idps/" + id + "/oidc_config"
		manager := e.SeedUser(e.OrgID, "manager")
		e.SeedMember(e.OrgID, manager, "ORG_USER_MANAGER")
		full := map[string]any{"clientId": "client", "issuer": "https://sso.example.com", "scopes": []string{"email", "profile"},
			"displayNameMapping": "OIDC_MAPPING_FIELD_EMAIL", "usernameMapping": "OIDC_MAPPING_FIELD_EMAIL"}
		long := strings.Repeat

		cases := []struct {
			name   string
			path   string
			token  string
			body   any
			status int
			code   int
		}{
			{"same values, empty secret", path, e.AdminToken, full, 409, 10},
			{"same values, same secret", path, e.AdminToken, idpWith(full, "clientSecret", secret), 409, 10},
			{"no permission", path, e.Intro.Mint(manager), idpWith(full, "clientId", "other"), 403, 7},
			{"unknown IdP", "/management/v1/idps/404404/oidc_config", e.AdminToken, full, 404, 5},
			{"no issuer", path, e.AdminToken, idpWith(full, "issuer", ""), 400, 3},
			{"issuer of 201 characters", path, e.AdminToken, idpWith(full, "issuer", idpIssuer(201)), 400, 3},
			{"http issuer", path, e.AdminToken, idpWith(full, "issuer", "http://sso.example.com"), 400, 3},
			{"no client id", path, e.AdminToken, idpWith(full, "clientId", nil), 400, 3},
			{"client id of 201 characters", path, e.AdminToken, idpWith(full, "clientId", long("c", 201)), 400, 3},
			{"client secret of 201 characters", path, e.AdminToken, idpWith(full, "clientSecret", long("s", 201)), 400, 3},
			{"21 scopes", path, e.AdminToken, idpWith(full, "scopes", idpScopes(21)), 400, 3},
			{"malformed JSON", path, e.AdminToken, `{"clientId": `, 400, 3},
			{"new issuer without the secret", path, e.AdminToken, idpWith(full, "issuer", "https://elsewhere.example.com"), 400, 3},
			{"new client id without the secret", path, e.AdminToken, idpWith(full, "clientId", "other"), 400, 3},
			// A new issuer or client id comes with the secret (the same one here).
			{"issuer of 200 characters", path, e.AdminToken, idpWith(full, "issuer", idpIssuer(200), "clientSecret", secret), 200, 0},
			{"client id of 200 characters", path, e.AdminToken, idpWith(full, "clientId", long("c", 200), "clientSecret", secret), 200, 0},
			{"20 scopes", path, e.AdminToken, idpWith(full, "scopes", idpScopes(20), "clientSecret", secret), 200, 0},
			{"fewer scopes, empty secret", path, e.AdminToken, idpWith(full, "scopes", []string{"email"}), 200, 0},
		}
		for _, tc := range cases {
			before := e.EventCount()
			r := e.REST("PUT", tc.path, tc.token, "", tc.body)
			if r.Status != tc.status || r.Code() != tc.code {
				t.Errorf("%s: %d %s; want %d code %d", tc.name, r.Status, r.Body, tc.status, tc.code)
				continue
			}
			if tc.status != 200 {
				if after := e.EventCount(); after != before {
					t.Errorf("%s: refused request added %d events", tc.name, after-before)
				}
				continue
			}
			evs := e.Events(id)
			idpWantJSONDetails(t, tc.name, idpObj(r.JSON["details"]), evs[len(evs)-1], evs[len(evs)-1])
		}
		if s := idpStoredSecret(t, e, e.OrgID, id); s != secret {
			t.Fatal("updates with an empty secret did not keep the stored one")
		}

		// The update replaces every field: what is not sent is empty.
		r = e.REST("PUT", path, e.AdminToken, "", map[string]any{"clientId": "client", "issuer": "https://sso.example.com"})
		if r.Status != 200 {
			t.Fatalf("minimal update: %d %s", r.Status, r.Body)
		}
		get := e.REST("GET", "/management/v1/idps/"+id, e.AdminToken, "", nil)
		p := idpObj(get.JSON["idp"])
		oc := idpObj(p["oidcConfig"])
		scopes, _ := oc["scopes"].([]any)
		if get.Status != 200 || len(scopes) != 0 || oc["displayNameMapping"] != nil && oc["displayNameMapping"] != "OIDC_MAPPING_FIELD_UNSPECIFIED" ||
			oc["usernameMapping"] != nil && oc["usernameMapping"] != "OIDC_MAPPING_FIELD_UNSPECIFIED" ||
			p["name"] != "Corp SSO" || p["stylingType"] != "STYLING_TYPE_VENDOR" || p["autoRegister"] != true || p["state"] != "IDP_STATE_ACTIVE" {
			t.Fatalf("after a minimal update: %d %s", get.Status, get.Body)
		}
		evs := e.Events(id)
		idpWantJSONDetails(t, "get", idpObj(p["details"]), evs[0], evs[len(evs)-1])
		if s := idpStoredSecret(t, e, e.OrgID, id); s != secret {
			t.Fatal("the minimal update did not keep the stored secret")
		}
		// A new secret of 200 characters replaces it.
		newSecret := "N" + strings.Repeat("e", 199)
		if r := e.REST("PUT", path, e.AdminToken, "", map[string]any{"clientId": "client", "issuer": "https://sso.example.com", "clientSecret": newSecret}); r.Status != 200 {
			t.Fatalf("secret of 200 characters: %d %s", r.Status, r.Body)
		}
		if s := idpStoredSecret(t, e, e.OrgID, id); s != newSecret {
			t.Fatal("the new secret was not stored")
		}

		// List limits.
		for _, name := range []string{"Alpha", "beta", "Gamma"} {
			if r := e.REST("POST", "/management/v1/idps/oidc", e.AdminToken, "", map[string]any{
				"name": name, "clientId": "c", "clientSecret": "s", "issuer": "https://idp.example.com"}); r.Status != 200 {
				t.Fatalf("add %s: %d %s", name, r.Status, r.Body)
			}
		}
		idQueries := func(n int) []any {
			out := make([]any, n)
			for i := range out {
				out[i] = map[string]any{"ownerTypeQuery": map[string]any{"ownerType": "IDP_OWNER_TYPE_ORG"}}
			}
			return out
		}
		names := func(r *mgmttest.Response) string {
			res, _ := r.JSON["result"].([]any)
			out := make([]string, len(res))
			for i, p := range res {
				out[i] = idpStr(idpObj(p)["name"])
			}
			return strings.Join(out, ",")
		}
		lists := []struct {
			name   string
			body   any
			status int
			want   string
			total  string
		}{
			{"all, default order (descending by name)", map[string]any{}, 200, "beta,Gamma,Corp SSO,Alpha", "4"},
			{"ascending page", map[string]any{"query": map[string]any{"offset": "1", "limit": 2, "asc": true}, "sortingColumn": "IDP_FIELD_NAME_NAME"}, 200, "Corp SSO,Gamma", "4"},
			{"limit 1000", map[string]any{"query": map[string]any{"limit": 1000}}, 200, "beta,Gamma,Corp SSO,Alpha", "4"},
			{"limit 1001", map[string]any{"query": map[string]any{"limit": 1001}}, 400, "", ""},
			{"20 queries", map[string]any{"queries": idQueries(20)}, 200, "beta,Gamma,Corp SSO,Alpha", "4"},
			{"21 queries", map[string]any{"queries": idQueries(21)}, 400, "", ""},
			{"name contains, ignoring case", map[string]any{"queries": []any{map[string]any{"idpNameQuery": map[string]any{
				"name": "A", "method": "TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE"}}}}, 200, "beta,Gamma,Alpha", "3"},
			{"name equals (the default method)", map[string]any{"queries": []any{map[string]any{"idpNameQuery": map[string]any{"name": "alpha"}}}}, 200, "", "0"},
			{"name query of 200 characters", map[string]any{"queries": []any{map[string]any{"idpNameQuery": map[string]any{"name": long("n", 200)}}}}, 200, "", "0"},
			{"name query of 201 characters", map[string]any{"queries": []any{map[string]any{"idpNameQuery": map[string]any{"name": long("n", 201)}}}}, 400, "", ""},
			{"id query of 201 characters", map[string]any{"queries": []any{map[string]any{"idpIdQuery": map[string]any{"id": long("1", 201)}}}}, 400, "", ""},
			{"id query", map[string]any{"queries": []any{map[string]any{"idpIdQuery": map[string]any{"id": id}}}}, 200, "Corp SSO", "1"},
			{"system owner", map[string]any{"queries": []any{map[string]any{"ownerTypeQuery": map[string]any{"ownerType": "IDP_OWNER_TYPE_SYSTEM"}}}}, 200, "", "0"},
			{"empty query", map[string]any{"queries": []any{map[string]any{}}}, 400, "", ""},
			{"undefined sorting column", map[string]any{"sortingColumn": 9}, 400, "", ""},
		}
		for _, tc := range lists {
			r := e.REST("POST", "/management/v1/idps/_search", e.AdminToken, "", tc.body)
			if r.Status != tc.status {
				t.Errorf("list %s: %d %s; want %d", tc.name, r.Status, r.Body, tc.status)
				continue
			}
			if tc.status != 200 {
				if r.Code() != 3 {
					t.Errorf("list %s: code %d; want 3", tc.name, r.Code())
				}
				continue
			}
			total := idpStr(idpObj(r.JSON["details"])["totalResult"])
			if total == "" {
				total = "0"
			}
			if got := names(r); got != tc.want || total != tc.total {
				t.Errorf("list %s: %q (total %s); want %q (total %s)", tc.name, got, total, tc.want, tc.total)
			}
			if strings.Contains(string(r.Body), secret) || strings.Contains(string(r.Body), newSecret) || strings.Contains(string(r.Body), "clientSecret") {
				t.Fatalf("list %s: the body holds a secret: %s", tc.name, r.Body)
			}
		}

		// State changes and removal over REST.
		before := e.EventCount()
		for _, tc := range []struct {
			method, path string
			status       int
		}{
			{"POST", "/management/v1/idps/" + id + "/_reactivate", 409},
			{"POST", "/management/v1/idps/" + id + "/_deactivate", 200},
			{"POST", "/management/v1/idps/" + id + "/_deactivate", 409},
			{"POST", "/management/v1/idps/404404/_deactivate", 404},
			{"POST", "/management/v1/idps/404404/_reactivate", 404},
			{"DELETE", "/management/v1/idps/404404", 404},
			{"GET", "/management/v1/idps/404404", 404},
		} {
			var body any
			if tc.method == "POST" {
				body = map[string]any{}
			}
			r := e.REST(tc.method, tc.path, e.AdminToken, "", body)
			if r.Status != tc.status {
				t.Errorf("%s %s: %d %s; want %d", tc.method, tc.path, r.Status, r.Body, tc.status)
			}
			if tc.status == 200 {
				evs := e.Events(id)
				idpWantJSONDetails(t, tc.path, idpObj(r.JSON["details"]), evs[len(evs)-1], evs[len(evs)-1])
			}
		}
		if after := e.EventCount(); after != before+1 {
			t.Fatalf("state changes added %d events; want 1", after-before)
		}
		r = e.REST("GET", "/management/v1/idps/"+id, e.AdminToken, "", nil)
		if idpObj(r.JSON["idp"])["state"] != "IDP_STATE_INACTIVE" {
			t.Fatalf("state after _deactivate: %s", r.Body)
		}
		r = e.REST("POST", "/management/v1/idps/_search", e.AdminToken, "", map[string]any{"queries": []any{
			map[string]any{"idpNameQuery": map[string]any{"name": "Alpha"}}}})
		alpha := idpStr(idpObj(r.JSON["result"].([]any)[0])["id"])
		r = e.REST("DELETE", "/management/v1/idps/"+alpha, e.AdminToken, "", nil)
		if r.Status != 200 {
			t.Fatalf("remove: %d %s", r.Status, r.Body)
		}
		evs = e.Events(alpha)
		idpWantJSONDetails(t, "remove", idpObj(r.JSON["details"]), evs[len(evs)-1], evs[len(evs)-1])
		if r := e.REST("GET", "/management/v1/idps/"+alpha, e.AdminToken, "", nil); r.Status != 404 {
			t.Fatalf("get after removal: %d", r.Status)
		}
		if r := e.REST("DELETE", "/management/v1/idps/"+alpha, e.AdminToken, "", nil); r.Status != 404 {
			t.Fatalf("second removal: %d", r.Status)
		}
		idpNoPlaintext(t, e, secret, newSecret)

		// After a restart everything reads back the same.
		wantGet := e.REST("GET", "/management/v1/idps/"+id, e.AdminToken, "", nil)
		wantList := e.REST("POST", "/management/v1/idps/_search", e.AdminToken, "", map[string]any{})
		e.Restart()
		gotGet := e.REST("GET", "/management/v1/idps/"+id, e.AdminToken, "", nil)
		gotList := e.REST("POST", "/management/v1/idps/_search", e.AdminToken, "", map[string]any{})
		if gotGet.Status != 200 || !reflect.DeepEqual(gotGet.JSON, wantGet.JSON) {
			t.Fatalf("get after restart: %d %s; want %s", gotGet.Status, gotGet.Body, wantGet.Body)
		}
		if gotList.Status != 200 || !reflect.DeepEqual(gotList.JSON, wantList.JSON) || names(gotList) != "beta,Gamma,Corp SSO" {
			t.Fatalf("list after restart: %d %s; want %s", gotList.Status, gotList.Body, wantList.Body)
		}
		if s := idpStoredSecret(t, e, e.OrgID, id); s != newSecret {
			t.Fatal("the secret does not decrypt after a restart")
		}
		if r := e.REST("POST", "/management/v1/idps/"+id+"/_reactivate", e.AdminToken, "", map[string]any{}); r.Status != 200 {
			t.Fatalf("reactivate after restart: %d %s", r.Status, r.Body)
		}
	})
}
