package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	adminv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1/adminv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/admin"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
)

// Tokens the fake authorizer knows.
const (
	ownerToken   = "owner-token"
	viewerToken  = "viewer-token"
	expiredToken = "expired-token"
	brokenToken  = "broken-token" // the authorizer fails unexpectedly
	outageToken  = "outage-token" // the authorizer's dependency is down
)

// authorizer is a table-backed Authorizer: each token maps to the outcome
// the real one (token validation plus directory roles) would give.
type authorizer struct {
	mu    sync.Mutex
	table map[string]error
	seen  []string
}

func newAuthorizer() *authorizer {
	return &authorizer{table: map[string]error{
		ownerToken:   nil,
		viewerToken:  connect.NewError(connect.CodePermissionDenied, errors.New("IAM_OWNER required")),
		expiredToken: connect.NewError(connect.CodeUnauthenticated, errors.New("token expired")),
		brokenToken:  errors.New("database exploded: secret detail"),
		outageToken:  connect.NewError(connect.CodeUnavailable, errors.New("introspection unavailable; retry")),
	}}
}

func (a *authorizer) IAMOwner(_ context.Context, token string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, token)
	err, ok := a.table[token]
	if !ok {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("unknown token"))
	}
	return err
}

type env struct {
	base  string
	m     *keys.Manager
	store *db.DB
	clock *keytest.Clock
	authz *authorizer
}

func start(t *testing.T, d db.Dialect) *env {
	t.Helper()
	clock := keytest.NewClock(time.Now().UTC().Truncate(time.Second))
	store := keytest.Open(t, keytest.DBOptions(t, d))
	m := keytest.Manager(t, store, keytest.Options(keys.ES256, clock))
	e := &env{m: m, store: store, clock: clock, authz: newAuthorizer()}
	e.base = serve(t, m, e.authz)
	return e
}

// serve runs the admin handler on a loopback server speaking HTTP/1.1 and
// h2c (gRPC needs HTTP/2), mounted as the service mounts it.
func serve(t *testing.T, km admin.KeyManager, authz admin.Authorizer) string {
	t.Helper()
	h, err := admin.NewHandler(km, authz, keytest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, p := range admin.Paths {
		mux.Handle(p, h)
	}
	srv := httptest.NewUnstartedServer(mux)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

type restResponse struct {
	status int
	body   map[string]any
	raw    string
}

func (r restResponse) code() int {
	c, _ := r.body["code"].(float64)
	return int(c)
}

func (r restResponse) detailID() string {
	ds, _ := r.body["details"].([]any)
	if len(ds) == 0 {
		return ""
	}
	d, _ := ds[0].(map[string]any)
	id, _ := d["id"].(string)
	return id
}

func rest(t *testing.T, base, method, path, auth, body string) restResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := restResponse{status: res.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

func restKeys(t *testing.T, e *env) []map[string]any {
	t.Helper()
	r := rest(t, e.base, http.MethodGet, "/admin/v1/keys", "Bearer "+ownerToken, "")
	if r.status != http.StatusOK {
		t.Fatalf("list: got %d %s; want 200", r.status, r.raw)
	}
	var out []map[string]any
	ks, _ := r.body["keys"].([]any)
	for _, k := range ks {
		out = append(out, k.(map[string]any))
	}
	return out
}

func TestREST(t *testing.T) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			e := start(t, d)
			ks := restKeys(t, e)
			if len(ks) != 1 || ks[0]["state"] != "SIGNING_KEY_STATE_ACTIVE" || ks[0]["algorithm"] != "ES256" || ks[0]["expires"] != nil {
				t.Fatalf("initial keys: got %v; want one active ES256 key without expiry", ks)
			}
			first := ks[0]["keyId"]

			r := rest(t, e.base, http.MethodPost, "/admin/v1/keys/_rotate", "Bearer "+ownerToken, `{}`)
			if r.status != http.StatusOK {
				t.Fatalf("rotate: got %d %s; want 200", r.status, r.raw)
			}
			publish, _ := time.Parse(time.RFC3339Nano, r.body["publishAt"].(string))
			signFrom, _ := time.Parse(time.RFC3339Nano, r.body["signFrom"].(string))
			if r.body["algorithm"] != "ES256" || r.body["keyId"] == "" || signFrom.Sub(publish) != keys.DefaultPrePublish {
				t.Fatalf("rotate response: got %v; want ES256, signing %s after publication", r.body, keys.DefaultPrePublish)
			}
			second := r.body["keyId"]
			if _, ok := e.m.KeyByID(second.(string)); !ok {
				t.Fatalf("rotated key not published at once")
			}

			r = rest(t, e.base, http.MethodPost, "/admin/v1/keys/_rotate", "bearer "+ownerToken, `{"algorithm":"EdDSA"}`)
			if r.status != http.StatusOK || r.body["algorithm"] != "EdDSA" {
				t.Fatalf("rotate to EdDSA: got %d %s", r.status, r.raw)
			}
			third := r.body["keyId"]

			ks = restKeys(t, e)
			var got []string
			for _, k := range ks {
				got = append(got, fmt.Sprint(k["keyId"], ":", k["state"]))
			}
			want := []string{
				fmt.Sprint(third, ":SIGNING_KEY_STATE_PUBLISHED"),
				fmt.Sprint(second, ":SIGNING_KEY_STATE_PUBLISHED"),
				fmt.Sprint(first, ":SIGNING_KEY_STATE_ACTIVE"),
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("keys: got %v; want %v", got, want)
			}

			// Once the new key signs, the first is retired and shows when it
			// leaves the key set.
			e.clock.Advance(keys.DefaultPrePublish)
			ks = restKeys(t, e)
			if ks[2]["state"] != "SIGNING_KEY_STATE_RETIRED" || ks[2]["expires"] == nil || ks[1]["state"] != "SIGNING_KEY_STATE_ACTIVE" || ks[1]["expires"] != nil {
				t.Fatalf("after the switch: got %v; want second active, first retired with expiry", ks)
			}

			for name, tc := range map[string]struct {
				method, path, auth, body string
				status, code             int
				detail                   string
			}{
				"unsupported algorithm": {http.MethodPost, "/admin/v1/keys/_rotate", "Bearer " + ownerToken, `{"algorithm":"HS256"}`, 400, 3, "ADMIN-invalid-algorithm"},
				"lower-case algorithm":  {http.MethodPost, "/admin/v1/keys/_rotate", "Bearer " + ownerToken, `{"algorithm":"es256"}`, 400, 3, "ADMIN-invalid-algorithm"},
				"malformed body":        {http.MethodPost, "/admin/v1/keys/_rotate", "Bearer " + ownerToken, `{"algorithm":`, 400, 3, ""},
				"wrong type":            {http.MethodPost, "/admin/v1/keys/_rotate", "Bearer " + ownerToken, `{"algorithm":1}`, 400, 3, ""},
				"no token":              {http.MethodPost, "/admin/v1/keys/_rotate", "", `{}`, 401, 16, "ADMIN-no-token"},
				"basic auth":            {http.MethodPost, "/admin/v1/keys/_rotate", "Basic b3duZXI6cHc=", `{}`, 401, 16, "ADMIN-no-token"},
				"empty bearer":          {http.MethodGet, "/admin/v1/keys", "Bearer ", "", 401, 16, "ADMIN-no-token"},
				"unknown token":         {http.MethodGet, "/admin/v1/keys", "Bearer nope", "", 401, 16, ""},
				"expired token":         {http.MethodPost, "/admin/v1/keys/_rotate", "Bearer " + expiredToken, `{}`, 401, 16, ""},
				"not an owner":          {http.MethodPost, "/admin/v1/keys/_rotate", "Bearer " + viewerToken, `{}`, 403, 7, ""},
				"not an owner, list":    {http.MethodGet, "/admin/v1/keys", "Bearer " + viewerToken, "", 403, 7, ""},
				"authorizer outage":     {http.MethodGet, "/admin/v1/keys", "Bearer " + outageToken, "", 503, 14, ""},
				"authorizer failure":    {http.MethodPost, "/admin/v1/keys/_rotate", "Bearer " + brokenToken, `{}`, 500, 13, ""},
			} {
				r := rest(t, e.base, tc.method, tc.path, tc.auth, tc.body)
				if r.status != tc.status || r.code() != tc.code {
					t.Errorf("%s: got %d code %d (%s); want %d code %d", name, r.status, r.code(), r.raw, tc.status, tc.code)
				}
				if tc.detail != "" && r.detailID() != tc.detail {
					t.Errorf("%s: detail %q; want %q (%s)", name, r.detailID(), tc.detail, r.raw)
				}
				if strings.Contains(r.raw, "secret detail") {
					t.Errorf("%s: internal error detail leaked: %s", name, r.raw)
				}
			}
			if n := len(restKeys(t, e)); n != 3 {
				t.Fatalf("refused calls changed the keys: %d keys; want 3", n)
			}
		})
	}
}

// TestRPC runs both procedures over Connect, gRPC and gRPC-web.
func TestRPC(t *testing.T) {
	e := start(t, db.SQLite)
	for _, protocol := range []string{"connect", "grpc", "grpc-web"} {
		t.Run(protocol, func(t *testing.T) {
			client := func(token string) adminv1connect.AdminServiceClient {
				opts := []connect.ClientOption{connect.WithInterceptors(bearerHeader(token))}
				switch protocol {
				case "grpc":
					opts = append(opts, connect.WithGRPC())
				case "grpc-web":
					opts = append(opts, connect.WithGRPCWeb())
				default:
					opts = append(opts, connect.WithProtoJSON())
				}
				return adminv1connect.NewAdminServiceClient(&http.Client{Transport: rpc.NewH2CTransport()}, e.base, opts...)
			}
			ctx := context.Background()
			owner := client(ownerToken)
			alg := keys.EdDSA
			res, err := owner.RotateSigningKey(ctx, &adminv1.RotateSigningKeyRequest{Algorithm: &alg})
			if err != nil {
				t.Fatalf("rotate: %v", err)
			}
			// Each protocol's rotation follows the previous, still pending
			// one, so sign_from may be later than publication + PrePublish.
			if res.GetAlgorithm() != keys.EdDSA || res.GetSignFrom().AsTime().Before(res.GetPublishAt().AsTime().Add(keys.DefaultPrePublish)) {
				t.Fatalf("rotate response: %v", res)
			}
			list, err := owner.ListSigningKeys(ctx, &adminv1.ListSigningKeysRequest{})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if got := list.GetKeys()[0]; got.GetKeyId() != res.GetKeyId() || got.GetState() != adminv1.SigningKeyState_SIGNING_KEY_STATE_PUBLISHED {
				t.Fatalf("newest listed key: got %v; want %s published", got, res.GetKeyId())
			}

			bad := "RS512"
			for name, tc := range map[string]struct {
				token string
				alg   *string
				want  connect.Code
			}{
				"no token":     {"", nil, connect.CodeUnauthenticated},
				"not an owner": {viewerToken, nil, connect.CodePermissionDenied},
				"bad alg":      {ownerToken, &bad, connect.CodeInvalidArgument},
			} {
				_, err := client(tc.token).RotateSigningKey(ctx, &adminv1.RotateSigningKeyRequest{Algorithm: tc.alg})
				if connect.CodeOf(err) != tc.want {
					t.Errorf("%s: got %v; want %v", name, err, tc.want)
				}
			}
		})
	}
}

// TestConcurrentRotations: replicas rotating at the same moment answer
// 200 or 409 (Aborted, retry), and exactly the successful ones stored a key.
func TestConcurrentRotations(t *testing.T) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			o := keytest.DBOptions(t, d)
			authz := newAuthorizer()
			var bases []string
			var first *keys.Manager
			for range 4 {
				m := keytest.Manager(t, keytest.Open(t, o), keytest.Options(keys.EdDSA, nil))
				if first == nil {
					first = m
				}
				bases = append(bases, serve(t, m, authz))
			}
			statuses := make([]restResponse, 8)
			var wg sync.WaitGroup
			for i := range statuses {
				wg.Go(func() {
					statuses[i] = rest(t, bases[i%len(bases)], http.MethodPost, "/admin/v1/keys/_rotate", "Bearer "+ownerToken, `{}`)
				})
			}
			wg.Wait()
			ok := 0
			for _, r := range statuses {
				switch {
				case r.status == http.StatusOK:
					ok++
				case r.status == http.StatusConflict && r.code() == int(connect.CodeAborted) && r.detailID() == "ADMIN-concurrent-rotation":
				default:
					t.Fatalf("concurrent rotation: got %d %s; want 200 or 409 Aborted", r.status, r.raw)
				}
			}
			ks, err := first.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if ok == 0 || len(ks) != ok+1 {
				t.Fatalf("%d rotations succeeded, %d keys stored; want successes + 1", ok, len(ks))
			}
		})
	}
}

// conflicting is a key manager whose rotations always lose the race, to
// pin the 409 mapping independently of timing.
type conflicting struct{ admin.KeyManager }

func (conflicting) Rotate(context.Context, string) (keys.KeyInfo, error) {
	return keys.KeyInfo{}, fmt.Errorf("keys: %w", keys.ErrConcurrentRotation)
}

func TestLostRaceIs409(t *testing.T) {
	e := start(t, db.SQLite)
	base := serve(t, conflicting{e.m}, e.authz)
	r := rest(t, base, http.MethodPost, "/admin/v1/keys/_rotate", "Bearer "+ownerToken, `{}`)
	if r.status != http.StatusConflict || r.code() != int(connect.CodeAborted) || r.detailID() != "ADMIN-concurrent-rotation" {
		t.Fatalf("lost race: got %d %s; want 409 Aborted", r.status, r.raw)
	}
}

type bearerHeader string

func (b bearerHeader) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if b != "" {
			req.Header().Set("Authorization", "Bearer "+string(b))
		}
		return next(ctx, req)
	}
}

func (b bearerHeader) WrapStreamingClient(n connect.StreamingClientFunc) connect.StreamingClientFunc {
	return n
}

func (b bearerHeader) WrapStreamingHandler(n connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return n
}
