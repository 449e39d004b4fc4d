package skaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const good = `apiVersion: skaffold/v4beta11
kind: Config
build:
  artifacts:
    - image: app-web
      context: .
      docker:
        dockerfile: deploy/Dockerfile
        buildArgs: {SERVICE: web}
    - image: app-api
      context: .
      docker:
        dockerfile: deploy/Dockerfile
        buildArgs: {SERVICE: api}
manifests:
  kustomize:
    paths: [deploy/k8s/overlays/dev]
deploy:
  kubectl: {}
portForward:
  - resourceType: service
    resourceName: web
    port: 8080
    localPort: 8080
`

// repo lays out the files the good config refers to.
func repo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{"deploy/Dockerfile", "deploy/k8s/overlays/dev/kustomization.yaml", "services/web/go.mod", "services/api/go.mod"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func want(root string) Want {
	return Want{
		Root:         root,
		Images:       []string{"app-web", "app-api"},
		ImagePrefix:  "app-",
		ServicePorts: map[string][]int32{"web": {8080}, "api": {8080}},
	}
}

func TestCheckAccepts(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(want(repo(t))); err != nil {
		t.Fatal(err)
	}
}

func TestCheckRejects(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new string // edit of the good config
		want     func(*Want)
		msg      string
	}{
		{"old schema", "skaffold/v4beta11", "skaffold/v2beta29", nil, `apiVersion "skaffold/v2beta29" is not a skaffold/v4 schema`},
		{"wrong kind", "kind: Config", "kind: Configuration", nil, `kind "Configuration" is not Config`},
		{"image not built", "    - image: app-api\n", "    - image: app-worker\n", nil, "artifacts build [app-web app-worker]; the manifests run [app-api app-web]"},
		{"image built but unused", "", "", func(w *Want) { w.Images = []string{"app-web"} }, "artifacts build [app-api app-web]; the manifests run [app-web]"},
		{"built twice", "image: app-api", "image: app-web", nil, "artifact app-web is built twice"},
		{"build arg mismatch", "{SERVICE: api}", "{SERVICE: web}", nil, `artifact app-api: buildArgs.SERVICE "web" builds image app-web`},
		{"no build arg", "buildArgs: {SERVICE: api}", "buildArgs: {}", nil, "artifact app-api: buildArgs.SERVICE is not set"},
		{"no such service", "", "", func(w *Want) {
			os.Remove(filepath.Join(w.Root, "services/api/go.mod"))
		}, `artifact app-api: services/api is not a Go module in context "."`},
		{"missing dockerfile", "dockerfile: deploy/Dockerfile\n        buildArgs: {SERVICE: api}", "dockerfile: Dockerfile\n        buildArgs: {SERVICE: api}", nil, "artifact app-api: dockerfile Dockerfile not found"},
		{"not docker", "      docker:\n        dockerfile: deploy/Dockerfile\n        buildArgs: {SERVICE: web}\n", "      ko: {}\n", nil, "artifact app-web: not a docker build"},
		{"missing kustomize path", "overlays/dev", "overlays/staging", nil, "kustomize path deploy/k8s/overlays/staging has no kustomization.yaml"},
		{"no kustomize", "manifests:\n  kustomize:\n    paths: [deploy/k8s/overlays/dev]\n", "manifests:\n  rawYaml: [k8s/*.yaml]\n", nil, "manifests.kustomize.paths is empty"},
		{"not kubectl", "  kubectl: {}", "  helm: {}", nil, "deploy.kubectl is not set"},
		{"forward to missing service", "resourceName: web", "resourceName: gateway", nil, "portForward: Service gateway is not rendered"},
		{"forward to missing port", "    port: 8080", "    port: 80", nil, "portForward: Service web has no port 80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := good
			if tc.old != "" {
				if !strings.Contains(good, tc.old) {
					t.Fatalf("test edit %q does not apply", tc.old)
				}
				text = strings.Replace(good, tc.old, tc.new, 1)
			}
			c, err := Parse([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			w := want(repo(t))
			if tc.want != nil {
				tc.want(&w)
			}
			err = c.Check(w)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v; want an error containing %q", err, tc.msg)
			}
		})
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	if _, err := Parse([]byte("build: [\n")); err == nil {
		t.Fatal("got no error for malformed YAML")
	}
	if _, err := Parse([]byte("build:\n  artifacts: {image: x}\n")); err == nil {
		t.Fatal("got no error for artifacts that are not a list")
	}
}
