package check

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/deploy/check/dockerfile"
	"github.com/gatehouse-id/gatehouse/deploy/check/manifest"
	"github.com/gatehouse-id/gatehouse/deploy/check/render"
	"github.com/gatehouse-id/gatehouse/deploy/check/skaffold"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// root is the repository root: this module lives in deploy/check.
var root = func() string {
	abs, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return abs
}()

// policyFor: the dev overlay brings its own Secret, datastores and all;
// any other overlay, like the base, expects operators to create
// gatehouse-secrets.
func policyFor(dir string) manifest.Policy {
	if filepath.Base(dir) == "dev" {
		return manifest.SelfContained()
	}
	return manifest.Base()
}

func build(t *testing.T, dir string) []manifest.Object {
	t.Helper()
	y, err := render.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Decode(y)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return objs
}

// TestKustomizations renders the base and every overlay and validates each.
func TestKustomizations(t *testing.T) {
	dirs := []string{filepath.Join(root, "deploy/k8s/base")}
	overlays, err := filepath.Glob(filepath.Join(root, "deploy/k8s/overlays/*/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range overlays {
		dirs = append(dirs, filepath.Dir(k))
	}
	if !slices.Contains(dirs, filepath.Join(root, "deploy/k8s/overlays/dev")) {
		t.Fatalf("got kustomizations %v; want deploy/k8s/overlays/dev among them", dirs)
	}
	for _, dir := range dirs {
		rel, _ := filepath.Rel(root, dir)
		t.Run(rel, func(t *testing.T) {
			if err := manifest.Validate(build(t, dir), policyFor(dir)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestDevOverlay: what the dev overlay adds on top of the base.
func TestDevOverlay(t *testing.T) {
	objs := build(t, filepath.Join(root, "deploy/k8s/overlays/dev"))
	kinds := map[string]bool{}
	var dbURL, pgPassword string
	pgEnv := map[string]string{}
	for _, o := range objs {
		kinds[o.Kind+" "+o.Name] = true
		switch x := o.Obj.(type) {
		case *appsv1.Deployment:
			if x.Spec.Replicas == nil || *x.Spec.Replicas != 1 {
				t.Errorf("dev Deployment %s: replicas %v; want 1", x.Name, x.Spec.Replicas)
			}
			// Only the directory bootstraps: the operator's public key and
			// the bootstrap file.
			env := map[string]corev1.EnvVar{}
			for _, e := range x.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e
			}
			key, file := env["GATEHOUSE_BOOTSTRAP_PUBLIC_KEY"], env["GATEHOUSE_BOOTSTRAP_FILE"]
			if x.Name == "directory" {
				if key.ValueFrom == nil || key.ValueFrom.SecretKeyRef == nil || key.ValueFrom.SecretKeyRef.Name != "gatehouse-bootstrap-admin" {
					t.Errorf("dev directory: GATEHOUSE_BOOTSTRAP_PUBLIC_KEY does not come from Secret gatehouse-bootstrap-admin: %+v", key)
				}
				if file.Value != "/etc/gatehouse/bootstrap/bootstrap.yaml" {
					t.Errorf("dev directory: GATEHOUSE_BOOTSTRAP_FILE = %q", file.Value)
				}
			} else if key.Name != "" || file.Name != "" {
				t.Errorf("dev %s reads the bootstrap variables; only the directory may", x.Name)
			}
		case *appsv1.StatefulSet:
			for _, e := range x.Spec.Template.Spec.Containers[0].Env {
				pgEnv[e.Name] = e.Value
			}
		case *corev1.ConfigMap:
			if strings.HasPrefix(x.Name, "gatehouse-bootstrap") {
				if !strings.Contains(x.Data["bootstrap.yaml"], "kind: Org") {
					t.Errorf("dev ConfigMap %s has no bootstrap.yaml", x.Name)
				}
				continue
			}
			if got := x.Data["GATEHOUSE_ISSUER"]; got != "http://gatehouse.local" {
				t.Errorf("dev GATEHOUSE_ISSUER = %q; want http://gatehouse.local", got)
			}
			if x.Data["GATEHOUSE_REDIS_URL"] == "" {
				t.Error("dev overlay sets no GATEHOUSE_REDIS_URL")
			}
		case *corev1.Secret:
			for _, k := range manifest.SecretKeys {
				if len(x.Data[k]) == 0 {
					t.Errorf("dev Secret %s has no %s", x.Name, k)
				}
			}
			dbURL, pgPassword = string(x.Data["DATABASE_URL"]), string(x.Data["POSTGRES_PASSWORD"])
		}
	}
	for _, want := range []string{"StatefulSet postgres", "Service postgres", "Deployment redis", "Service redis"} {
		if !kinds[want] {
			t.Errorf("dev overlay does not render %s", want)
		}
	}
	for _, img := range manifest.Images(objs) {
		if !strings.HasPrefix(img, "gatehouse-") && img != "postgres:15" && img != "redis:7" {
			t.Errorf("dev overlay runs unexpected image %s", img)
		}
	}

	// The generated DATABASE_URL logs in as the user the postgres container
	// creates, with the password it is given.
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal("dev DATABASE_URL does not parse") // err would print the password
	}
	pw, _ := u.User.Password()
	if u.User.Username() != pgEnv["POSTGRES_USER"] || pw != pgPassword || pgPassword == "" ||
		strings.TrimPrefix(u.Path, "/") != pgEnv["POSTGRES_DB"] {
		t.Errorf("dev DATABASE_URL does not log in as POSTGRES_USER %q with POSTGRES_PASSWORD to POSTGRES_DB %q",
			pgEnv["POSTGRES_USER"], pgEnv["POSTGRES_DB"])
	}
}

// TestSkaffold: skaffold builds exactly the images its manifests run.
func TestSkaffold(t *testing.T) {
	cfg, err := skaffold.Load(filepath.Join(root, "skaffold.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := skaffold.Want{Root: root, ImagePrefix: "gatehouse-", ServicePorts: map[string][]int32{}}
	if cfg.Manifests.Kustomize != nil {
		for _, p := range cfg.Manifests.Kustomize.Paths {
			objs := build(t, filepath.Join(root, p))
			for _, img := range manifest.Images(objs) {
				if strings.HasPrefix(img, want.ImagePrefix) && !slices.Contains(want.Images, img) {
					want.Images = append(want.Images, img)
				}
			}
			for _, o := range objs {
				if s, ok := o.Obj.(*corev1.Service); ok {
					for _, port := range s.Spec.Ports {
						want.ServicePorts[o.Name] = append(want.ServicePorts[o.Name], port.Port)
					}
				}
			}
		}
	}
	if err := cfg.Check(want); err != nil {
		t.Error(err)
	}
	// The images are exactly the four services.
	var services []string
	for _, img := range want.Images {
		services = append(services, strings.TrimPrefix(img, want.ImagePrefix))
	}
	slices.Sort(services)
	if got, w := strings.Join(services, " "), "authn directory edge tokens"; got != w {
		t.Errorf("manifests run Gatehouse services %s; want %s", got, w)
	}
}

// TestDockerfile: deploy/Dockerfile follows the build contract and handles
// every module in go.work.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "deploy/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// The modules in go.work, as the go command reads it.
	cmd := exec.Command("go", "work", "edit", "-json", filepath.Join(root, "go.work"))
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go work edit -json: %v", err)
	}
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(out, &work); err != nil {
		t.Fatal(err)
	}
	base := manifest.Base()
	want := dockerfile.Want{UID: base.RunAsUser, Port: base.ContainerPort}
	for _, u := range work.Use {
		want.Modules = append(want.Modules, strings.TrimPrefix(filepath.ToSlash(u.DiskPath), "./"))
	}
	if !slices.Contains(want.Modules, "pkg") {
		t.Fatalf("go.work uses %v; want pkg among them", want.Modules)
	}
	if err := dockerfile.Check(string(data), want); err != nil {
		t.Error(err)
	}
}

// TestReadme: the README documents the keys operators must provide and the
// check itself.
func TestReadme(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "deploy/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append(slices.Clone(manifest.SecretKeys), "gatehouse-secrets", "make deploy-check", "skaffold dev", "skaffold run") {
		if !strings.Contains(string(data), want) {
			t.Errorf("deploy/README.md does not mention %s", want)
		}
	}
}
