package scope

import (
	"errors"
	"slices"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

func TestParse(t *testing.T) {
	got, err := Parse("openid  profile openid urn:gatehouse:iam:org:project:id:gatehouse:aud urn:gatehouse:iam:org:id:42")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"openid", "profile", "urn:gatehouse:iam:org:project:id:gatehouse:aud", "urn:gatehouse:iam:org:id:42"}
	if !slices.Equal(got, want) {
		t.Fatalf("Parse = %v; want %v", got, want)
	}
	if a := Audience([]string{"client", "p1"}, got); !slices.Equal(a, []string{"client", "p1", "gatehouse"}) {
		t.Fatalf("Audience = %v", a)
	}
	if Org(got) != "42" {
		t.Fatalf("Org = %q", Org(got))
	}
	for _, bad := range []string{"admin", "urn:gatehouse:iam:org:project:id::aud", "urn:gatehouse:iam:org:project:id:x", "urn:gatehouse:iam:org:id:", "openid\tprofile"} {
		if _, err := Parse(bad); !errors.Is(err, oauth.ErrInvalidScope) {
			t.Errorf("Parse(%q) = %v; want invalid_scope", bad, err)
		}
	}
}
