// Command tokens runs the tokens service as its own process: public and internal
// handlers on one port (HTTP/1.1 and h2c), with /healthz, /readyz and /metrics.
package main

import (
	"context"
	"os"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/services/tokens/service"
)

func main() {
	os.Exit(process.Main(config.RoleTokens, func(ctx context.Context, env process.Env) (process.Component, error) {
		return service.New(ctx, env, service.Deps{})
	}, &service.Settings{}, &config.IdPEgress{}))
}
