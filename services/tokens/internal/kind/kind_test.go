package kind

import (
	"strings"
	"testing"
)

func TestKinds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want Kind
	}{
		{NewAccessToken(), AccessToken},
		{NewRefreshToken(), RefreshToken},
		{NewCode(), AuthorizationCode},
		{"eyJhbGciOiJSUzI1NiJ9.e30.sig", Unknown},
		{"AZR2x4NQ7l0m8vYbQ0cVbcmHnO3Jx5Tq0p1eD9i4nLw9c2T8aKs", Unknown}, // before prefixes
		{"gatehouse_xx_abc", Unknown},
	} {
		if got := Of(tc.raw); got != tc.want {
			t.Errorf("Of(%q) = %v; want %v", tc.raw, got, tc.want)
		}
		for _, k := range []Kind{AccessToken, RefreshToken, AuthorizationCode} {
			if Other(tc.raw, k) != (tc.want != Unknown && tc.want != k) {
				t.Errorf("Other(%q, %v) = %v", tc.raw, k, Other(tc.raw, k))
			}
		}
	}
	if a, b := NewAccessToken(), NewAccessToken(); a == b || len(a) != 64 || strings.ContainsAny(a[13:], "+/=") {
		t.Fatalf("access tokens %q, %q", a, b)
	}
}
