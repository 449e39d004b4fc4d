package service

import (
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

func TestSettings(t *testing.T) {
	t.Parallel()
	load := func(vars map[string]string) (*Settings, error) {
		c, err := config.Load(config.RoleEdge, func(k string) string { return vars[k] })
		if err != nil {
			t.Fatal(err)
		}
		return config.Get[*Settings](c)
	}
	if s, err := load(nil); err != nil || s.IdleLifetime != 2*time.Hour || s.AbsoluteLifetime != 10*time.Hour || s.Retention != 24*time.Hour {
		t.Fatalf("defaults: %+v, %v; want 2h idle, 10h absolute, 24h retention", s, err)
	}
	if s, err := load(map[string]string{"GATEHOUSE_SESSION_IDLE_LIFETIME": "30m", "GATEHOUSE_SESSION_ABSOLUTE_LIFETIME": "30m"}); err != nil ||
		s.IdleLifetime != 30*time.Minute || s.AbsoluteLifetime != 30*time.Minute {
		t.Fatalf("equal lifetimes: %+v, %v; want both 30m (equal is allowed)", s, err)
	}
	for name, tc := range map[string]struct {
		vars map[string]string
		want string
	}{
		"idle over absolute":         {map[string]string{"GATEHOUSE_SESSION_IDLE_LIFETIME": "11h"}, "GATEHOUSE_SESSION_IDLE_LIFETIME: must not exceed GATEHOUSE_SESSION_ABSOLUTE_LIFETIME"},
		"idle over shorter absolute": {map[string]string{"GATEHOUSE_SESSION_ABSOLUTE_LIFETIME": "1h"}, "GATEHOUSE_SESSION_IDLE_LIFETIME: must not exceed"},
		"idle zero":                  {map[string]string{"GATEHOUSE_SESSION_IDLE_LIFETIME": "0s"}, "GATEHOUSE_SESSION_IDLE_LIFETIME: want a positive duration"},
		"absolute malformed":         {map[string]string{"GATEHOUSE_SESSION_ABSOLUTE_LIFETIME": "10 hours"}, "GATEHOUSE_SESSION_ABSOLUTE_LIFETIME: want a positive duration"},
	} {
		if _, err := load(tc.vars); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
		}
	}
}
