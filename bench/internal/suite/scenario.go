package suite

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/load"
)

// Kind is one measured operation.
type Kind string

// The scenarios of `make bench`.
const (
	ClientCredentialsJWT    Kind = "client_credentials JWT"
	ClientCredentialsOpaque Kind = "client_credentials opaque"
	Introspection           Kind = "JWT introspection"
	KeySet                  Kind = "key set GET"
)

// Target is a running Gatehouse.
type Target struct {
	Base      string // edge's base URL, which is also the issuer
	KeyFile   string // bootstrap-admin-key.json written by directory
	Algorithm string // the signing algorithm the server was started with
	// CPU returns the CPU time the server process(es) have used so far;
	// nil means server CPU is not measured.
	CPU func() (time.Duration, error)
}

// Options size each scenario.
type Options struct {
	Client *http.Client // see load.NewClient
	Warmup int          // requests sent, and not measured, first
	// WarmupTime is the least time the warm-up lasts (more rounds of
	// Warmup requests): a fresh server's CPU per request falls for
	// seconds while its heap grows (page faults) and caches fill.
	WarmupTime  time.Duration
	Requests    int // measured requests
	Concurrency int
}

// Row is one scenario's outcome.
type Row struct {
	Scenario  string
	Kind      Kind
	Available bool   // false when the server does not serve the endpoint yet
	Note      string // why a scenario is not available
	Result    load.Result
	// CPU is the server CPU used during the measured requests; CPUKnown is
	// false when the Target has no CPU reading.
	CPU      time.Duration
	CPUKnown bool
}

// CPUPerRequest is the server CPU charged to each measured request.
func (r Row) CPUPerRequest() time.Duration {
	if r.Result.Requests == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Result.Requests)
}

// Name is the scenario's name in a report.
func Name(k Kind, algorithm string) string {
	switch k {
	case ClientCredentialsJWT:
		return string(k) + " " + algorithm
	case Introspection:
		return string(k) + " (" + algorithm + ")"
	}
	return string(k)
}

// scenario is a Kind made concrete for one fixture.
type scenario struct {
	req   load.Request
	check load.Check
}

// Run measures each kind in order on t. A scenario whose endpoint answers
// 404 is reported as not available; any other setup failure, or ctx ending,
// stops the run and is returned with the rows measured so far.
func Run(ctx context.Context, t Target, f *Fixture, kinds []Kind, o Options) ([]Row, error) {
	var rows []Row
	for _, k := range kinds {
		row := Row{Scenario: Name(k, t.Algorithm), Kind: k, Available: true}
		sc, err := build(ctx, o.Client, t, f, k)
		var unavailable *notAvailable
		switch {
		case errors.As(err, &unavailable):
			row.Available, row.Note = false, unavailable.Error()
			rows = append(rows, row)
			continue
		case err != nil:
			return rows, fmt.Errorf("%s: %w", row.Scenario, err)
		}
		for start := time.Now(); ; {
			if _, err := load.Run(ctx, load.Options{Client: o.Client, Requests: o.Warmup, Concurrency: o.Concurrency}, sc.req, sc.check); err != nil {
				return rows, fmt.Errorf("%s warm-up: %w", row.Scenario, err)
			}
			if o.Warmup == 0 || time.Since(start) >= o.WarmupTime {
				break
			}
		}
		var before time.Duration
		if t.CPU != nil {
			if before, err = t.CPU(); err != nil {
				return rows, fmt.Errorf("%s: server CPU: %w", row.Scenario, err)
			}
		}
		row.Result, err = load.Run(ctx, load.Options{Client: o.Client, Requests: o.Requests, Concurrency: o.Concurrency}, sc.req, sc.check)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", row.Scenario, err)
		}
		if t.CPU != nil {
			after, err := t.CPU()
			if err != nil {
				return rows, fmt.Errorf("%s: server CPU: %w", row.Scenario, err)
			}
			row.CPU, row.CPUKnown = after-before, true
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// notAvailable marks a scenario whose endpoint the server does not serve.
type notAvailable struct{ what string }

func (e *notAvailable) Error() string { return "not available: " + e.what }

func build(ctx context.Context, c *http.Client, t Target, f *Fixture, k Kind) (scenario, error) {
	switch k {
	case ClientCredentialsJWT:
		return tokenScenario(t, f.JWTClient, true), nil
	case ClientCredentialsOpaque:
		return tokenScenario(t, f.OpaqueClient, false), nil
	case KeySet:
		u := t.Base + "/oauth/v2/keys"
		return scenario{
			req: func(ctx context.Context) (*http.Request, error) {
				return http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			},
			check: func(body []byte) error {
				var ks struct {
					Keys []json.RawMessage `json:"keys"`
				}
				if err := json.Unmarshal(body, &ks); err != nil || len(ks.Keys) == 0 {
					return fmt.Errorf("not a non-empty key set: %.100s", body)
				}
				return nil
			},
		}, nil
	case Introspection:
		return introspectionScenario(ctx, c, t, f)
	}
	return scenario{}, fmt.Errorf("unknown scenario %q", k)
}

// tokenScenario is the client_credentials grant with client_secret_basic.
func tokenScenario(t Target, cr Credentials, wantJWT bool) scenario {
	u, authz := t.Base+"/oauth/v2/token", cr.basic()
	const form = "grant_type=client_credentials"
	return scenario{
		req: func(ctx context.Context) (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", authz)
			return req, nil
		},
		check: func(body []byte) error { return checkToken(body, wantJWT, t.Algorithm) },
	}
}

// checkToken accepts a token response whose access token has the
// expected form: a JWT signed with alg, or an opaque value.
func checkToken(body []byte, wantJWT bool, alg string) error {
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" || tok.TokenType != "Bearer" {
		return fmt.Errorf("not a Bearer token response: %.100s", body)
	}
	isJWT := strings.Count(tok.AccessToken, ".") == 2
	switch {
	case wantJWT && !isJWT:
		return errors.New("access token is not a JWT")
	case !wantJWT && isJWT:
		return errors.New("access token is a JWT; want opaque")
	case !wantJWT:
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok.AccessToken[:strings.IndexByte(tok.AccessToken, '.')])
	var hdr struct {
		Alg string `json:"alg"`
	}
	if err != nil || json.Unmarshal(raw, &hdr) != nil {
		return errors.New("access token has a malformed JOSE header")
	}
	if hdr.Alg != alg {
		return fmt.Errorf("access token signed with %s; want %s", hdr.Alg, alg)
	}
	return nil
}

// introspectionScenario introspects one JWT access token whose audience
// holds the API app's project, with the app's client_secret_basic.
func introspectionScenario(ctx context.Context, c *http.Client, t Target, f *Fixture) (scenario, error) {
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := call(ctx, c, http.MethodPost, t.Base+"/oauth/v2/token", f.JWTClient.basic(), "", url.Values{
		"grant_type": {"client_credentials"},
		"scope":      {"urn:gatehouse:iam:org:project:id:" + f.ProjectID + ":aud"},
	}, &tok); err != nil {
		return scenario{}, fmt.Errorf("token to introspect: %w", err)
	}
	u, authz := t.Base+"/oauth/v2/introspect", f.API.basic()
	form := url.Values{"token": {tok.AccessToken}}.Encode()
	sc := scenario{
		req: func(ctx context.Context) (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", authz)
			return req, nil
		},
		check: func(body []byte) error {
			var r struct {
				Active bool `json:"active"`
			}
			if err := json.Unmarshal(body, &r); err != nil || !r.Active {
				return fmt.Errorf("token not reported active: %.100s", body)
			}
			return nil
		},
	}
	// Probe once: an endpoint that is not wired yet is reported, not failed.
	req, err := sc.req(ctx)
	if err != nil {
		return scenario{}, err
	}
	res, err := c.Do(req)
	if err != nil {
		return scenario{}, fmt.Errorf("probe introspection: %w", err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return scenario{}, &notAvailable{what: "POST /oauth/v2/introspect answered 404"}
	}
	return sc, nil
}
