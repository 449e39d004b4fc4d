package grants

import (
	"context"

	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
)

// deviceCode is the device authorization grant (RFC 8628 §3.4) with all
// four client authentication methods (a public client sends its
// client_id). Only an active OIDC app registered for the grant may use it
// (unauthorized_client, the dispatcher's Spec); the polling answers and
// the single redemption are lifecycle.ExchangeDeviceCode's.
type deviceCode struct{ Deps }

type deviceParams struct {
	DeviceCode string `form:"device_code,required"`
}

func (g *deviceCode) handle(ctx context.Context, r *Request[deviceParams]) (*mint.Response, error) {
	return g.Lifecycle.ExchangeDeviceCode(ctx, r.Client, r.Params.DeviceCode)
}
