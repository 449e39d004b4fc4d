package management_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
)

// TestReflection is what grpcurl does against the running service: list
// the services over gRPC server reflection and fetch the management API's
// descriptors. The internal DirectoryService, served on the same port, is
// neither listed nor described.
func TestReflection(t *testing.T) {
	e := mgmttest.Start(t, db.SQLite)
	client := grpcreflect.NewClient(&http.Client{Transport: rpc.NewH2CTransport()}, e.Base, connect.WithGRPC())
	stream := client.NewStream(context.Background())
	t.Cleanup(func() { _, _ = stream.Close() })

	names, err := stream.ListServices()
	if err != nil {
		t.Fatalf("ListServices: %v", err)
	}
	if !slices.Contains(names, protoreflect.FullName(managementv1connect.ManagementServiceName)) {
		t.Fatalf("services %v; want %s among them", names, managementv1connect.ManagementServiceName)
	}
	if slices.Contains(names, protoreflect.FullName(directoryv1connect.DirectoryServiceName)) {
		t.Fatalf("services %v list the internal %s", names, directoryv1connect.DirectoryServiceName)
	}

	files, err := stream.FileContainingSymbol(managementv1connect.ManagementServiceName)
	if err != nil {
		t.Fatalf("FileContainingSymbol(%s): %v", managementv1connect.ManagementServiceName, err)
	}
	if len(files) == 0 || files[0].GetName() != "gatehouse/management/v1/management.proto" {
		t.Fatalf("got %d files, first %q; want gatehouse/management/v1/management.proto first", len(files), files[0].GetName())
	}
	// The answer carries the file's whole dependency graph: a client can
	// build the service from it alone, with every method and REST rule.
	reg, err := protodesc.NewFiles(&descriptorpb.FileDescriptorSet{File: files})
	if err != nil {
		t.Fatalf("descriptors from reflection do not resolve: %v", err)
	}
	d, err := reg.FindDescriptorByName(managementv1connect.ManagementServiceName)
	if err != nil {
		t.Fatal(err)
	}
	got := d.(protoreflect.ServiceDescriptor)
	want := mxService()
	if got.Methods().Len() != want.Methods().Len() {
		t.Fatalf("reflected service has %d methods; want %d", got.Methods().Len(), want.Methods().Len())
	}
	for i := 0; i < want.Methods().Len(); i++ {
		wm := want.Methods().Get(i)
		gm := got.Methods().ByName(wm.Name())
		if gm == nil || gm.Input().FullName() != wm.Input().FullName() || gm.Output().FullName() != wm.Output().FullName() {
			t.Fatalf("reflected method %s = %v; want %s -> %s", wm.Name(), gm, wm.Input().FullName(), wm.Output().FullName())
		}
	}

	// Not described either when asked by name.
	if _, err := stream.FileContainingSymbol(directoryv1connect.DirectoryServiceName); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("FileContainingSymbol(%s): %v; want NotFound", directoryv1connect.DirectoryServiceName, err)
	}
	if _, err := stream.FileByFilename("gatehouse/directory/v1/directory.proto"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("FileByFilename(gatehouse/directory/v1/directory.proto): %v; want NotFound", err)
	}
}
