package floor

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestMeasureReportsEveryOperation(t *testing.T) {
	costs, err := Measure(context.Background(), Budget{MinOps: 16})
	if err != nil {
		t.Fatal(err)
	}
	if len(costs) < 3 {
		t.Fatalf("got %d costs; want at least 3", len(costs))
	}
	for _, c := range costs {
		if c.Ops < 16 {
			t.Errorf("%s: %d ops; want at least 16", c.Name, c.Ops)
		}
	}
}

func TestMeasureChecksPasswordsWithTheServersParameters(t *testing.T) {
	costs, err := Measure(context.Background(), Budget{MinOps: 16})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, c := range costs {
		if c.Op != Argon2idVerify {
			continue
		}
		found = true
		// pkg/secrets hashes with OWASP's second set; a change there must
		// show in the report's operation name.
		if !strings.Contains(c.Name, "(m=19456,t=2,p=1)") || c.PerOp < time.Millisecond {
			t.Errorf("argon2id verify: %q, %v per op; want the server's m=19456,t=2,p=1 and at least 1 ms", c.Name, c.PerOp)
		}
	}
	if !found {
		t.Fatalf("no %v among %+v", Argon2idVerify, costs)
	}
	if got := argon2Params("not a hash"); got != "unknown parameters" {
		t.Errorf("argon2Params(malformed) = %q", got)
	}
}
