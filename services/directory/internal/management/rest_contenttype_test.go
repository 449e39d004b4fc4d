package management_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// A REST body is JSON whatever a curl -d (form) or a missing Content-Type
// says, as ZITADEL's gateway reads it; a format Gatehouse does not speak
// is still refused, and a malformed body is still 400.
func TestRESTBodyIsJSONWhateverTheContentType(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		post := func(contentType, body string) int {
			t.Helper()
			req, _ := http.NewRequest(http.MethodPost, e.Base+"/management/v1/projects", strings.NewReader(body))
			if contentType != "" {
				req.Header.Set("Content-Type", contentType)
			}
			req.Header.Set("Authorization", "Bearer "+e.AdminToken)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			return res.StatusCode
		}
		for i, ct := range []string{"application/json", "application/x-www-form-urlencoded", "", "text/plain; charset=utf-8"} {
			if status := post(ct, `{"name":"P`+string(rune('a'+i))+`"}`); status != http.StatusOK {
				t.Errorf("Content-Type %q: %d; want 200", ct, status)
			}
		}
		if status := post("application/x-www-form-urlencoded", "name=Pz"); status != http.StatusBadRequest {
			t.Errorf("a form body: %d; want 400", status)
		}
		if status := post("application/xml", `{"name":"Px"}`); status != http.StatusUnsupportedMediaType {
			t.Errorf("application/xml: %d; want 415", status)
		}
	})
}
