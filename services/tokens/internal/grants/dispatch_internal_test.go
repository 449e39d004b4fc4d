package grants

import (
	"context"
	"testing"

	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
)

// A grant cannot be registered without saying how its caller is
// authenticated: client authentication methods with the client kinds that
// may use it, or SelfAuthenticated, never neither or both.
func TestRegisterRefusesAGrantWithoutAuthentication(t *testing.T) {
	t.Parallel()
	handle := func(context.Context, *Request[struct{}]) (*mint.Response, error) { return nil, nil }
	for name, spec := range map[string]Spec{
		"neither":           {},
		"both":              {Methods: []clients.Method{clients.SecretBasic}, Kinds: oidcApp, SelfAuthenticated: true},
		"methods, no kinds": {Methods: []clients.Method{clients.SecretBasic}},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("registered %+v", spec)
				}
			}()
			register(&Endpoint{grants: map[string]grant{}}, "x", spec, handle)
		})
	}
	// Every grant New registers passes.
	for name, g := range New(Deps{}, nil).grants {
		if g.spec.SelfAuthenticated == (len(g.spec.Methods) > 0) {
			t.Errorf("%s: %+v", name, g.spec)
		}
	}
}
