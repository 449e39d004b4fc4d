package authorize

import (
	"context"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

// DeviceRequest makes the request a person approves for a device
// authorization (RFC 8628 §3.3), found by the user code they typed: the
// client must still be an active OIDC application, and the organization
// and identity provider the scopes name are checked as at the
// authorization endpoint. The tokens service checked the scopes against
// the client when the device asked. The person always sees the consent
// page (Flow.complete); failures show on Gatehouse.
func (v *Validator) DeviceRequest(ctx context.Context, d DeviceAuthorization, locales []string) (*Request, *oauth.Error) {
	client, err := v.client(ctx, Params{"client_id": {d.ClientID}, "scope": {strings.Join(d.Scopes, " ")}})
	if err != nil {
		return nil, oauth.As(err)
	}
	s := &steps{v: v, client: client, req: &Request{
		ClientID: d.ClientID, AppName: client.GetName(), Scopes: d.Scopes, ClientOrgID: client.GetOrgId(),
		AdminClient: client.GetAdminClient(), GrantIDs: client.GetGrantIds(), Issuer: v.Issuer, UILocales: locales,
		Device: &DeviceRef{ID: d.ID, UserCode: d.UserCode},
	}}
	for _, sc := range d.Scopes {
		if org, ok := strings.CutPrefix(sc, OrgScopePrefix); ok && org != "" {
			s.req.OrgID = org
		}
	}
	if err := s.organization(ctx); err != nil {
		return nil, oauth.As(err)
	}
	return s.req, nil
}
