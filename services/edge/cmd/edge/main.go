// Command edge runs Gatehouse's public entry point. With no service URLs set
// it is the whole embedded server: authn, tokens and directory in-process,
// SQLite files in GATEHOUSE_DATA_DIR.
package main

import (
	"os"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/services/edge/service"
)

func main() {
	os.Exit(process.Main(config.RoleEdge, service.Build, service.Sections))
}
