package service

import (
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
)

// internalAPI is the internal TokenService. Its procedures land with the
// token endpoint (introspection needs issued tokens); until then connect
// answers them with Unimplemented.
type internalAPI struct {
	tokensv1connect.UnimplementedTokenServiceHandler
}

// TokenService is the in-process internal API, for edge's embedded mode.
func (s *Service) TokenService() tokensv1connect.TokenServiceHandler { return s.internal }
