package e2e

import (
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestAnonymousVisitsStoreNoBrowser: cookieless visits to /authorize (a
// crawler, a flood) record no browser; only a sign-in does. Their pending
// requests expire and are pruned (session.PruneSteps).
func TestAnonymousVisitsStoreNoBrowser(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_RATE_LIMIT": "0"})
	authn, err := sql.Open("sqlite", "file:"+filepath.Join(e.dataDir, "authn.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer authn.Close()
	count := func(table string) int {
		t.Helper()
		var n int
		if err := authn.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	const visits = 300
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i := range visits {
		res, err := anon.Get(e.authURL("s", "n"))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if i == 0 && (res.StatusCode != http.StatusFound && res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Set-Cookie"), "gatehouse_ua")) {
			t.Fatalf("anonymous /authorize: %d, Set-Cookie %q; want a redirect to the login page with a browser cookie", res.StatusCode, res.Header.Get("Set-Cookie"))
		}
	}
	if n := count("user_agents"); n != 0 {
		t.Errorf("%d anonymous visits stored %d browsers; want none", visits, n)
	}
	if n := count("auth_requests"); n != visits {
		t.Errorf("%d pending requests; want one per visit (%d), each expiring", n, visits)
	}

	// A sign-in records its browser, once.
	c := browser(t, e.base)
	e.signIn(c, "alice", afPassword, "s1")
	if n := count("user_agents"); n != 1 {
		t.Errorf("%d browsers after one sign-in; want 1", n)
	}
}
