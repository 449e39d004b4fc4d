package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1
          envFrom:
            - configMapRef: {name: cfg}
`

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "kustomization.yaml", `
resources: [deploy.yaml]
configMapGenerator:
  - name: cfg
    literals: [A=1]
`)
	write(t, dir, "deploy.yaml", deployment)
	out, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"kind: Deployment", "kind: ConfigMap", `A: "1"`} {
		if !strings.Contains(s, want) {
			t.Errorf("got:\n%s\nwant it to contain %q", s, want)
		}
	}
	// The generator's hash suffix reaches the reference.
	if strings.Count(s, "name: cfg-") != 2 {
		t.Errorf("got:\n%s\nwant the ConfigMap and its reference both named cfg-<hash>", s)
	}
	// Legacy order, as the kustomize CLI: the ConfigMap, generated after the
	// Deployment, is emitted before it.
	if cm, d := strings.Index(s, "kind: ConfigMap"), strings.Index(s, "kind: Deployment"); cm > d {
		t.Errorf("got:\n%s\nwant the ConfigMap before the Deployment", s)
	}
}

func TestBuildFails(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"no kustomization":        {},
		"missing resource":        {"kustomization.yaml": "resources: [absent.yaml]\n"},
		"malformed kustomization": {"kustomization.yaml": "resources: [\n"},
		"outside the root":        {"kustomization.yaml": "resources: [../../../../../../etc/hostname]\n"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for n, text := range files {
				write(t, dir, n, text)
			}
			if out, err := Build(dir); err == nil {
				t.Fatalf("got output %q and no error; want an error", out)
			}
		})
	}
}
