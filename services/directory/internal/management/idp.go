package management

import (
	"context"
	"errors"
	"fmt"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/netguard"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/idps"
)

// idpCommands and idpQueries build the IdP domain objects from the
// Server's fields.
func (s *Server) idpCommands() *idps.Commands {
	return &idps.Commands{ES: s.ES, Cipher: s.IdPSecrets}
}

func (s *Server) idpQueries() *idps.Queries { return &idps.Queries{DB: s.ES.DB()} }

// idp loads an identity provider of the target organization; those of
// other organizations (and removed ones) are NotFound. field names the id
// in the request ("id" or "idp_id"), whose maximum length (200) is a
// string.max_len rule in the proto: lim reports it, and after it any limit
// of the request no check reported before, as IDP-invalid-id.
func (s *Server) idp(ctx context.Context, lim *apierr.Limits, field, id string) (*idps.IDP, error) {
	var f apierr.Fields
	f.Check(lim.Length(field, field, id, 1))
	lim.Rest(&f)
	if err := f.Err("IDP-invalid-id"); err != nil {
		return nil, err
	}
	p, err := s.idpQueries().Get(ctx, authz.FromContext(ctx).OrgID, id)
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("IDP-not-found", "identity provider not found")
	}
	return p, err
}

// checkOIDCConfig validates the configuration fields shared by create and
// update (client id, issuer, scopes, mappings) and returns them; lim holds
// the request's limits from the proto (lengths, the number of scopes). An
// issuer whose host is an address the egress policy refuses is refused
// here, before anything dials it; a host name is checked by authn's dialer.
func (s *Server) checkOIDCConfig(f *apierr.Fields, lim *apierr.Limits, clientID, issuer string, scopes []string, display, username managementv1.OIDCMappingField) idps.Config {
	f.Check(lim.Length("client_id", "client_id", clientID, 1))
	if err := lim.Length("issuer", "issuer", issuer, 1); err != nil {
		f.Check(err)
	} else if msg := idps.IssuerProblem(issuer); msg != "" {
		f.Add("issuer", msg)
	} else if r := (*netguard.Refused)(nil); errors.As(s.IdPEgress.CheckURL(issuer), &r) {
		f.Add("issuer", fmt.Sprintf("names %s, an address calls to identity providers may not reach: it is %s", r.Addr, r.Rule))
	}
	f.Check(lim.Count("scopes", "scopes"))
	for i, sc := range scopes {
		if err := lim.Length("scopes", fmt.Sprintf("scopes[%d]", i), sc, 1); err != nil {
			f.Check(err)
		} else if msg := idps.ScopeProblem(sc); msg != "" {
			f.Add("scopes", msg)
		}
	}
	checkEnum(f, "display_name_mapping", int32(display), managementv1.OIDCMappingField_name)
	checkEnum(f, "username_mapping", int32(username), managementv1.OIDCMappingField_name)
	return idps.Config{
		ClientID: clientID, Issuer: issuer, Scopes: idps.StringList(scopes),
		DisplayNameMapping: int32(display), UsernameMapping: int32(username),
	}
}

// checkEnum refuses enum numbers the API does not define (binary gRPC
// clients can send any number; JSON ones only names).
func checkEnum(f *apierr.Fields, field string, v int32, names map[int32]string) {
	if _, ok := names[v]; !ok {
		f.Add(field, "is not a defined value")
	}
}

// idpToProto renders the read form of an IdP; it has no client secret.
func idpToProto(p *idps.IDP) *managementv1.IDP {
	scopes := []string(p.Scopes)
	if scopes == nil {
		scopes = []string{}
	}
	return &managementv1.IDP{
		Id:           p.ID,
		Details:      readDetails(p.CreationDate, p.ChangeDate, p.Sequence, p.OrgID),
		State:        managementv1.IDPState(p.State),
		Name:         p.Name,
		StylingType:  managementv1.StylingType(p.StylingType),
		Owner:        managementv1.IDPOwnerType_IDP_OWNER_TYPE_ORG,
		AutoRegister: p.AutoRegister,
		TrustAmr:     p.TrustAMR,
		Config: &managementv1.IDP_OidcConfig{OidcConfig: &managementv1.IDPOIDCConfig{
			ClientId:           p.ClientID,
			Issuer:             p.Issuer,
			Scopes:             scopes,
			DisplayNameMapping: managementv1.OIDCMappingField(p.DisplayNameMapping),
			UsernameMapping:    managementv1.OIDCMappingField(p.UsernameMapping),
		}},
	}
}
