package form_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/form"
)

func request(method, contentType, body string) *http.Request {
	r := httptest.NewRequest(method, "/oauth/v2/revoke?token=from-query", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r
}

func TestParse(t *testing.T) {
	r := request(http.MethodPost, "application/x-www-form-urlencoded; charset=UTF-8",
		"client_id=c&client_secret=s&client_assertion=a&client_assertion_type=t&x=1")
	r.SetBasicAuth("u%3A1", "p")
	got, err := form.Parse(r)
	if err != nil {
		t.Fatal(err)
	}
	c := got.Creds
	if !c.Basic || c.BasicUser != "u%3A1" || c.BasicPass != "p" || c.ClientID != "c" || c.ClientSecret != "s" ||
		c.Assertion != "a" || c.AssertionType != "t" {
		t.Fatalf("got credentials %+v", c)
	}
	if got.Get("x") != "1" || got.Get("token") != "" {
		t.Fatalf("got values %v; want the body's only", got.Values)
	}
}

func TestParseRefuses(t *testing.T) {
	bearer := request(http.MethodPost, "application/x-www-form-urlencoded", "token=t")
	bearer.Header.Set("Authorization", "Bearer t")
	cases := map[string]*http.Request{
		"GET":             request(http.MethodGet, "application/x-www-form-urlencoded", ""),
		"no content type": request(http.MethodPost, "", "token=t"),
		"JSON":            request(http.MethodPost, "application/json", `{"token":"t"}`),
		"repeated":        request(http.MethodPost, "application/x-www-form-urlencoded", "token=a&token=b"),
		"malformed":       request(http.MethodPost, "application/x-www-form-urlencoded", "token=%zz"),
		"oversized":       request(http.MethodPost, "application/x-www-form-urlencoded", "token="+strings.Repeat("a", form.MaxBody)),
		"not Basic":       bearer,
	}
	for name, r := range cases {
		_, err := form.Parse(r)
		if !errors.Is(err, oauth.ErrInvalidRequest) {
			t.Errorf("%s: got %v; want invalid_request", name, err)
		}
	}
}

func TestSingle(t *testing.T) {
	if _, err := form.Single(url.Values{"a": {"1"}, "b": {"2", "3"}}); !errors.Is(err, oauth.ErrInvalidRequest) {
		t.Fatalf("got %v; want invalid_request", err)
	}
	got, err := form.Single(url.Values{"a": {"1"}, "b": {""}})
	if err != nil || len(got) != 2 || got["a"] != "1" || got["b"] != "" {
		t.Fatalf("got %v, %v", got, err)
	}
}

// Decode fills tagged fields, names the first missing required one, and
// ignores what has no field.
func TestDecode(t *testing.T) {
	t.Parallel()
	type params struct {
		Code     string `form:"code,required"`
		Redirect string `form:"redirect_uri,required"`
		Verifier string `form:"code_verifier"`
		Untagged string
	}
	for _, tc := range []struct {
		name    string
		values  map[string]string
		want    params
		wantErr string
	}{
		{"all", map[string]string{"code": "c", "redirect_uri": "r", "code_verifier": "v", "Untagged": "x", "extra": "y"},
			params{Code: "c", Redirect: "r", Verifier: "v"}, ""},
		{"optional absent", map[string]string{"code": "c", "redirect_uri": "r"}, params{Code: "c", Redirect: "r"}, ""},
		{"first required missing", map[string]string{}, params{}, "code is required"},
		{"second required empty", map[string]string{"code": "c", "redirect_uri": ""}, params{}, "redirect_uri is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got params
			err := form.Decode(tc.values, &got)
			if tc.wantErr != "" {
				if oe := oauth.As(err); err == nil || oe.Code != oauth.InvalidRequest || oe.Description != tc.wantErr {
					t.Fatalf("error %v; want invalid_request %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Decode = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
