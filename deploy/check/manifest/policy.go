package manifest

import (
	"slices"
	"strings"
)

// Policy says what a rendered Gatehouse deployment must contain beyond
// the checks that apply to every object.
type Policy struct {
	// Services are the Gatehouse processes. Each needs a ServiceAccount, a
	// Deployment and a Service of that name, its container running image
	// ImagePrefix+name.
	Services    []string
	ImagePrefix string
	// Public are the Gatehouse Services an Ingress must route to. No
	// Ingress may route to the others: they are internal and must declare
	// appProtocol kubernetes.io/h2c on their ports.
	Public []string
	// RunAsUser is the uid Gatehouse containers run as.
	RunAsUser int64
	// ContainerPort is where every Gatehouse process listens and is probed.
	ContainerPort int32
	// Secrets must be rendered. Names are generator names: kustomize's
	// hash suffix is allowed.
	Secrets []string
	// ExternalSecrets are created by operators, not rendered, with the keys
	// they must hold. A reference to a Secret that is not rendered must
	// name one of these, and one of its keys.
	ExternalSecrets map[string][]string
	// Callers lists, by app.kubernetes.io/name, who connects to each
	// workload that is not public: its NetworkPolicies must admit exactly
	// these workloads to its serving port (ContainerPort for Gatehouse, a
	// datastore's first port), and nothing from outside the namespace.
	// Every workload, listed or not, needs a NetworkPolicy of its own, and
	// its metrics port must not be open to every source.
	Callers map[string][]string
}

// Callers is who calls whom in distributed mode: edge routes to the three
// services, authn calls directory and tokens, tokens and directory call
// each other; the services with a database reach PostgreSQL, and edge
// (rate limits) and tokens (revocation list) reach Redis.
var Callers = map[string][]string{
	"authn":     {"edge"},
	"tokens":    {"edge", "authn", "directory"},
	"directory": {"edge", "authn", "tokens"},
	"postgres":  {"authn", "tokens", "directory"},
	"redis":     {"edge", "tokens"},
}

// SecretKeys are the keys of gatehouse-secrets, the Secret operators
// create for the base.
var SecretKeys = []string{"MASTER_KEY", "INTERNAL_TOKEN", "DATABASE_URL", "ADMIN_PASSWORD"}

// Base is the policy for deploy/k8s/base and overlays that, like it, expect
// operators to create gatehouse-secrets.
func Base() Policy {
	return Policy{
		Services:        []string{"edge", "authn", "tokens", "directory"},
		ImagePrefix:     "gatehouse-",
		Public:          []string{"edge"},
		RunAsUser:       65532,
		ContainerPort:   8080,
		ExternalSecrets: map[string][]string{"gatehouse-secrets": SecretKeys},
		Callers:         Callers,
	}
}

// BootstrapAdminKeys are the keys of gatehouse-bootstrap-admin, the Secret
// holding the operator's public key (GATEHOUSE_BOOTSTRAP_PUBLIC_KEY): the
// operator makes the key pair, so even the dev overlay cannot render it.
var BootstrapAdminKeys = []string{"PUBLIC_KEY"}

// SelfContained is the policy for an overlay that brings everything it
// needs but the operator's own public key (the dev overlay):
// gatehouse-secrets is rendered, and every other reference must resolve
// to a rendered object.
func SelfContained() Policy {
	p := Base()
	p.ExternalSecrets = map[string][]string{"gatehouse-bootstrap-admin": BootstrapAdminKeys}
	p.Secrets = []string{"gatehouse-secrets"}
	return p
}

func (p Policy) isService(name string) bool { return slices.Contains(p.Services, name) }
func (p Policy) isPublic(name string) bool  { return slices.Contains(p.Public, name) }

// isGatehouseImage reports whether image is built from this repository
// (skaffold substitutes the tag, so the manifests carry none).
func (p Policy) isGatehouseImage(image string) bool {
	return strings.HasPrefix(image, p.ImagePrefix)
}
