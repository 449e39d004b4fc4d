package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"

	adminv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
)

// TestEveryRPCHasACommand: a management or admin RPC added to the API
// cannot ship without its command.
func TestEveryRPCHasACommand(t *testing.T) {
	a := &App{}
	a.Root()
	have := map[protoreflect.FullName]bool{}
	for _, n := range a.rpcs {
		have[n] = true
	}
	for _, svc := range []protoreflect.ServiceDescriptor{
		managementv1.File_gatehouse_management_v1_management_proto.Services().ByName("ManagementService"),
		adminv1.File_gatehouse_admin_v1_admin_proto.Services().ByName("AdminService"),
	} {
		for i := 0; i < svc.Methods().Len(); i++ {
			m := svc.Methods().Get(i)
			if !have[m.Input().FullName()] {
				t.Errorf("%s/%s has no gatehouse command", svc.FullName(), m.Name())
			}
		}
	}
}

// TestEveryCommandHasHelpWithExamples walks the tree.
func TestEveryCommandHasHelpWithExamples(t *testing.T) {
	root := (&App{}).Root()
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		n++
		if c.Name() == "completion" {
			return // cobra's own, documented by cobra
		}
		if c.Short == "" {
			t.Errorf("%q has no short help", c.CommandPath())
		}
		if c.Example == "" && c.Name() != "help" {
			t.Errorf("%q has no example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 60 {
		t.Fatalf("only %d commands", n)
	}
}

func TestOutputFlagAndErrorsAreOneLine(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main([]string{"orgs", "list", "-o", "xml", "--config", t.TempDir() + "/c.json"}, strings.NewReader(""), &out, &errOut)
	if code != 1 || strings.Count(errOut.String(), "\n") != 1 || !strings.HasPrefix(errOut.String(), "error: -o \"xml\"") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	code = Main([]string{"users", "list", "--config", t.TempDir() + "/c.json"}, strings.NewReader(""), &out, &errOut)
	if code != 1 || errOut.String() != "error: not logged in: run gatehouse login --issuer URL\n" {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}
