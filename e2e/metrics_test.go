package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// TestMetricsByRoute: the request histogram is labelled by route pattern
// and service, never by a raw path carrying ids, and the token endpoint
// counts its outcomes.
func TestMetricsByRoute(t *testing.T) {
	metricsAddr := freeAddr(t)
	edge := startProc(t, config.RoleEdge, map[string]string{"GATEHOUSE_DATA_DIR": t.TempDir(), "GATEHOUSE_METRICS_ADDR": metricsAddr})
	do(t, "GET", edge.base+"/management/v1/users/123456789", nil, nil)
	do(t, "GET", edge.base+"/.well-known/openid-configuration", nil, nil)
	postForm(t, edge.base+"/oauth/v2/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {"nobody"}, "client_secret": {"x"}})

	_, body := do(t, "GET", "http://"+metricsAddr+"/metrics", nil, nil)
	for _, re := range []string{
		`http_server_request_duration_seconds_count\{[^}]*http_route="/management/v1/\*"[^}]*service_name="gatehouse-edge"`,
		`http_server_request_duration_seconds_count\{[^}]*http_route="/.well-known/openid-configuration"`,
		`gatehouse_tokens_refused_total\{error="invalid_client",grant_type="client_credentials"[^}]*\} 1`,
	} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("/metrics lacks %s", re)
		}
	}
	if strings.Contains(body, "123456789") {
		t.Error("/metrics carries an id from a request path")
	}
}

// TestRequestIDReachesInternalCalls: the id a client sends to edge is on
// the log lines of the internal calls its request makes (directory asking
// tokens about an opaque management token).
func TestRequestIDReachesInternalCalls(t *testing.T) {
	d := startDistributed(t, testutil.RedisURL(t))
	_, tok := operatorToken(t, d.edge.base, d.directoryData, d.issuer)
	if strings.Count(str(tok["access_token"]), ".") == 2 {
		t.Fatal("the bootstrap admin's token is a JWT; this test needs an opaque one, which directory must introspect")
	}
	res, body := do(t, "GET", d.edge.base+"/management/v1/orgs/me", nil,
		map[string]string{"Authorization": "Bearer " + str(tok["access_token"]), "X-Request-Id": "trace-me-4711"})
	if res.StatusCode != 200 {
		t.Fatalf("GetMyOrg: %d %s", res.StatusCode, body)
	}
	// Log lines are written in batches: wait for them.
	logged := func() (edge, dir, tokens bool) {
		edge = strings.Contains(d.edge.log.String(), `"request_id":"trace-me-4711"`)
		dir = strings.Contains(d.directory.log.String(), `"request_id":"trace-me-4711"`)
		for _, line := range d.tokens.log.Lines() {
			if line["request_id"] == "trace-me-4711" && strings.Contains(fmt.Sprint(line["path"]), "TokenService") {
				tokens = true
			}
		}
		return
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		edge, dir, tokens := logged()
		if edge && dir && tokens {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("request id on edge's log: %v, directory's: %v, tokens' internal call: %v; want all", edge, dir, tokens)
		}
	}
}

// TestDiscoveryAdvertisesOnlyPublishedAlgorithms: a relying party can get
// an ID token in every algorithm discovery lists, because each has a key
// in the key set (interop finding: RS256, ES256 and EdDSA were listed with
// one RS256 key).
func TestDiscoveryAdvertisesOnlyPublishedAlgorithms(t *testing.T) {
	edge := startProc(t, config.RoleEdge, map[string]string{"GATEHOUSE_DATA_DIR": t.TempDir()})
	_, disc := do(t, "GET", edge.base+"/.well-known/openid-configuration", nil, nil)
	_, jwks := do(t, "GET", edge.base+"/oauth/v2/keys", nil, nil)
	var d struct {
		Algs []string `json:"id_token_signing_alg_values_supported"`
	}
	var k struct {
		Keys []struct {
			Alg string `json:"alg"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(disc), &d); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(jwks), &k); err != nil {
		t.Fatal(err)
	}
	published := map[string]bool{}
	for _, key := range k.Keys {
		published[key.Alg] = true
	}
	if len(d.Algs) == 0 {
		t.Fatal("no id_token_signing_alg_values_supported")
	}
	for _, a := range d.Algs {
		if !published[a] {
			t.Errorf("discovery lists %s, which no published key has (key set: %s)", a, jwks)
		}
	}
}
