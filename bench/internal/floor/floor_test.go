package floor

import (
	"context"
	"testing"
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
