package reqinfo

import (
	"context"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	if FromContext(context.Background()) != nil || RequestID(context.Background()) != "" {
		t.Fatal("empty context must carry no info")
	}
	ctx := NewContext(context.Background(), &Info{RequestID: "abc", ClientAddr: "192.0.2.1", PeerTrusted: true})
	got := FromContext(ctx)
	if got == nil || got.ClientAddr != "192.0.2.1" || !got.PeerTrusted {
		t.Fatalf("got %+v; want the stored info", got)
	}
	if RequestID(ctx) != "abc" {
		t.Fatalf("got request id %q; want abc", RequestID(ctx))
	}
}
