package service

import (
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

func TestSettings(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.RoleEdge, func(k string) string {
		return map[string]string{"GATEHOUSE_BOOTSTRAP_PUBLIC_KEY": "ssh-rsa AAAA", "GATEHOUSE_BOOTSTRAP_FILE": "/nonexistent/boot.yaml"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = config.Get[*Settings](c)
	for _, want := range []string{"GATEHOUSE_BOOTSTRAP_PUBLIC_KEY: want a PEM public key", "GATEHOUSE_BOOTSTRAP_FILE: "} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want %q", err, want)
		}
	}
}
