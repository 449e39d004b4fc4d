package cmd

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func (a *App) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of gatehouse (as gatehouse --version)",
		Long: `version prints the module version gatehouse was built as, and the VCS
revision and commit time when the build recorded them (go build in a
checkout; a workspace or -buildvcs=false build records none).`,
		Example: "  gatehouse version\n  gatehouse --version",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(a.Stdout, version())
			return err
		},
	}
}

// version describes this build from the Go build information.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "gatehouse (unknown version: built without module support)"
	}
	return versionOf(bi)
}

// versionOf is "gatehouse VERSION (revision REV, TIME, modified)", the
// parenthesis only for what the build recorded.
func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(unknown version)"
	}
	var vcs []string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			vcs = append([]string{"revision " + s.Value}, vcs...)
		case "vcs.time":
			vcs = append(vcs, s.Value)
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		vcs = append(vcs, "modified")
	}
	if len(vcs) == 0 {
		return "gatehouse " + v
	}
	return fmt.Sprintf("gatehouse %s (%s)", v, strings.Join(vcs, ", "))
}
