// Package ossltest holds the tests' rule for OpenSSL.
package ossltest

import (
	"os"
	"testing"

	"github.com/gatehouse-id/gatehouse/services/tokens/ossl"
)

// Require skips the test where libcrypto.so.3 cannot be loaded, except
// under CI=true, where it fails it (.ci/run installs libssl3).
func Require(t testing.TB) {
	t.Helper()
	v, err := ossl.Load()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("OpenSSL must load under CI: %v", err)
		}
		t.Skipf("OpenSSL signing not tested: %v", err)
	}
	t.Logf("signing with %s", v)
}
