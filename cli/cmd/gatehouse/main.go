// Command gatehouse administers a Gatehouse identity provider over its
// management API (gatehouse --help).
package main

import (
	"os"

	"github.com/gatehouse-id/gatehouse/cli/internal/cmd"
)

func main() {
	os.Exit(cmd.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
