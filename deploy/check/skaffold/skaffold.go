package skaffold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Config is the subset of a skaffold v4 Config that is checked.
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Build      struct {
		Artifacts []Artifact `json:"artifacts"`
	} `json:"build"`
	Manifests struct {
		Kustomize *struct {
			Paths []string `json:"paths"`
		} `json:"kustomize"`
	} `json:"manifests"`
	Deploy struct {
		Kubectl *struct{} `json:"kubectl"`
	} `json:"deploy"`
	PortForward []PortForward `json:"portForward"`
}

// Artifact is one image skaffold builds.
type Artifact struct {
	Image   string `json:"image"`
	Context string `json:"context"`
	Docker  *struct {
		Dockerfile string            `json:"dockerfile"`
		BuildArgs  map[string]string `json:"buildArgs"`
	} `json:"docker"`
}

// PortForward is one port skaffold forwards during `skaffold dev`.
type PortForward struct {
	ResourceType string `json:"resourceType"`
	ResourceName string `json:"resourceName"`
	Port         int32  `json:"port"`
	LocalPort    int32  `json:"localPort"`
}

// Parse decodes skaffold.yaml. Fields not in Config are ignored: the file
// may use the rest of the schema.
func Parse(data []byte) (*Config, error) {
	var c Config
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("parse skaffold config: %w", err)
	}
	return &c, nil
}

// Load reads and parses a skaffold.yaml.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read skaffold config: %w", err)
	}
	return Parse(data)
}

// Want is what the repository and the rendered manifests expect.
type Want struct {
	// Root is the directory skaffold runs in (the repository root);
	// relative paths in the config are resolved against it.
	Root string
	// Images are the repository-built images the manifests run.
	Images []string
	// ImagePrefix + the SERVICE build arg must give the artifact's image,
	// and Root/services/<SERVICE> must be a Go module.
	ImagePrefix string
	// ServicePorts are the rendered Services and their ports.
	ServicePorts map[string][]int32
}

// Check compares the config with want and returns every mismatch.
func (c *Config) Check(want Want) error {
	var errs []error
	failf := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if !strings.HasPrefix(c.APIVersion, "skaffold/v4") {
		failf("apiVersion %q is not a skaffold/v4 schema", c.APIVersion)
	}
	if c.Kind != "Config" {
		failf("kind %q is not Config", c.Kind)
	}

	var built []string
	for _, a := range c.Build.Artifacts {
		if slices.Contains(built, a.Image) {
			failf("artifact %s is built twice", a.Image)
		}
		built = append(built, a.Image)
		checkArtifact(a, want, failf)
	}
	sort.Strings(built)
	images := slices.Sorted(slices.Values(want.Images))
	if !slices.Equal(built, images) {
		failf("artifacts build %v; the manifests run %v", built, images)
	}

	if c.Manifests.Kustomize == nil || len(c.Manifests.Kustomize.Paths) == 0 {
		failf("manifests.kustomize.paths is empty")
	} else {
		for _, p := range c.Manifests.Kustomize.Paths {
			if !isFile(filepath.Join(want.Root, p, "kustomization.yaml")) {
				failf("kustomize path %s has no kustomization.yaml", p)
			}
		}
	}
	if c.Deploy.Kubectl == nil {
		failf("deploy.kubectl is not set")
	}
	for _, pf := range c.PortForward {
		if pf.ResourceType != "service" {
			continue // only Services are rendered by name; others are not checked
		}
		ports, ok := want.ServicePorts[pf.ResourceName]
		switch {
		case !ok:
			failf("portForward: Service %s is not rendered", pf.ResourceName)
		case !slices.Contains(ports, pf.Port):
			failf("portForward: Service %s has no port %d (it has %v)", pf.ResourceName, pf.Port, ports)
		}
	}
	return errors.Join(errs...)
}

func checkArtifact(a Artifact, want Want, failf func(string, ...any)) {
	if a.Docker == nil {
		failf("artifact %s: not a docker build", a.Image)
		return
	}
	context := filepath.Join(want.Root, a.Context)
	dockerfile := a.Docker.Dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	if !isFile(filepath.Join(context, dockerfile)) {
		failf("artifact %s: dockerfile %s not found in context %q", a.Image, dockerfile, a.Context)
	}
	svc := a.Docker.BuildArgs["SERVICE"]
	switch {
	case svc == "":
		failf("artifact %s: buildArgs.SERVICE is not set", a.Image)
	case want.ImagePrefix+svc != a.Image:
		failf("artifact %s: buildArgs.SERVICE %q builds image %s", a.Image, svc, want.ImagePrefix+svc)
	case !isFile(filepath.Join(context, "services", svc, "go.mod")):
		failf("artifact %s: services/%s is not a Go module in context %q", a.Image, svc, a.Context)
	}
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
