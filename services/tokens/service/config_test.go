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
	s, err := load(nil)
	if err != nil || s.SigningAlgorithm != "RS256" || s.AccessTokenLifetime != 12*time.Hour || s.RefreshReuseGrace != 10*time.Second {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	if s, err := load(map[string]string{"GATEHOUSE_REFRESH_REUSE_GRACE": "0s"}); err != nil || s.RefreshReuseGrace != 0 {
		t.Fatalf("no grace: %+v, %v", s, err)
	}
	for name, tc := range map[string]struct {
		vars map[string]string
		want string
	}{
		"signing algorithm":          {map[string]string{"GATEHOUSE_SIGNING_ALGORITHM": "HS256"}, "GATEHOUSE_SIGNING_ALGORITHM"},
		"signing library":            {map[string]string{"GATEHOUSE_SIGNING_LIBRARY": "boringssl"}, "GATEHOUSE_SIGNING_LIBRARY"},
		"rotation too often":         {map[string]string{"GATEHOUSE_KEY_ROTATION_INTERVAL": "1m"}, "GATEHOUSE_KEY_ROTATION_INTERVAL"},
		"refresh idle over absolute": {map[string]string{"GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME": "2000h", "GATEHOUSE_REFRESH_TOKEN_ABSOLUTE_LIFETIME": "1000h"}, "GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME"},
		"negative grace":             {map[string]string{"GATEHOUSE_REFRESH_REUSE_GRACE": "-1s"}, "GATEHOUSE_REFRESH_REUSE_GRACE"},
	} {
		if _, err := load(tc.vars); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
		}
	}
}
