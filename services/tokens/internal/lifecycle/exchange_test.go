package lifecycle

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
)

func TestNarrowAudience(t *testing.T) {
	t.Parallel()
	held := []string{"app", "project", "gatehouse"}
	for _, tc := range []struct {
		name    string
		held    []string
		targets []string
		want    []string
		refused bool
	}{
		{"default keeps all but the management API", held, nil, []string{"app", "project"}, false},
		{"narrowed", held, []string{"project"}, []string{"project"}, false},
		{"named twice", held, []string{"project", "project"}, []string{"project"}, false},
		{"not held", held, []string{"other"}, nil, true},
		{"management API", held, []string{"gatehouse"}, nil, true},
		{"empty value", held, []string{""}, nil, true},
		{"nothing left", []string{"gatehouse"}, nil, nil, true},
	} {
		got, err := narrowAudience(tc.held, tc.targets)
		if tc.refused {
			if !errors.Is(err, &oauth.Error{Code: oauth.InvalidTarget}) {
				t.Errorf("%s: %v %v; want invalid_target", tc.name, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestChain(t *testing.T) {
	t.Parallel()
	one, err := chain("bob", nil)
	if err != nil || string(one) != `{"sub":"bob"}` {
		t.Fatalf("chain without prior = %s %v", one, err)
	}
	two, err := chain("carol", one)
	if err != nil {
		t.Fatal(err)
	}
	if got := accesstoken.Actors(two); !slices.Equal(got, []string{"carol", "bob"}) {
		t.Errorf("actors of %s = %v; want carol, then bob", two, got)
	}
	if depth(two) != 2 || depth(nil) != 0 {
		t.Errorf("depth(%s) = %d, depth(nil) = %d", two, depth(two), depth(nil))
	}
	if _, err := chain("x", json.RawMessage(`"not an object"`)); err == nil {
		t.Error("malformed prior act accepted")
	}
}
