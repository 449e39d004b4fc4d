package users

import (
	"slices"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/dircache"
)

// The caches of tokens and authn keep a machine user's client across the
// changes dircache.CredentialNeutral names: they must be this package's
// metadata events and nothing else (a secret, key, state or grant change
// must drop the client).
func TestCredentialNeutralEventsAreMetadata(t *testing.T) {
	t.Parallel()
	want := []string{EventMetadataSet, EventMetadataRemoved}
	if got := dircache.CredentialNeutral; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("dircache.CredentialNeutral = %v; want the metadata events %v", got, want)
	}
}
