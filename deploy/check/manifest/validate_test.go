package manifest

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse-id/gatehouse/deploy/check/render"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The negative tests start from the real dev overlay, which must pass, and
// break one thing at a time.
const devOverlay = "../../k8s/overlays/dev"

var devYAML = sync.OnceValues(func() ([]byte, error) { return render.Build(devOverlay) })

// dev returns a fresh decoding of the dev overlay, safe to mutate.
func dev(t *testing.T) []Object {
	t.Helper()
	y, err := devYAML()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(y)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find[T any](t *testing.T, objs []Object, kind, name string) T {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && (o.Name == name || strings.HasPrefix(o.Name, name+"-")) {
			return o.Obj.(T)
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	var zero T
	return zero
}

func without(objs []Object, kind, name string) []Object {
	var out []Object
	for _, o := range objs {
		if o.Kind != kind || (o.Name != name && !strings.HasPrefix(o.Name, name+"-")) {
			out = append(out, o)
		}
	}
	return out
}

func withoutKind(objs []Object, kind string) []Object {
	var out []Object
	for _, o := range objs {
		if o.Kind != kind {
			out = append(out, o)
		}
	}
	return out
}

func netpol(t *testing.T, objs []Object, name string) *networkingv1.NetworkPolicy {
	return find[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", name)
}

func podPeer(name string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}}}
}

func deploy(t *testing.T, objs []Object, name string) *corev1.PodSpec {
	return &find[*appsv1.Deployment](t, objs, "Deployment", name).Spec.Template.Spec
}

func ctr(t *testing.T, objs []Object, name string) *corev1.Container {
	return &deploy(t, objs, name).Containers[0]
}

func config(t *testing.T, objs []Object) map[string]string {
	return find[*corev1.ConfigMap](t, objs, "ConfigMap", "gatehouse-config").Data
}

func secret(t *testing.T, objs []Object) map[string][]byte {
	return find[*corev1.Secret](t, objs, "Secret", "gatehouse-secrets").Data
}

func setEnv(c *corev1.Container, e corev1.EnvVar) {
	for i := range c.Env {
		if c.Env[i].Name == e.Name {
			c.Env[i] = e
			return
		}
	}
	c.Env = append(c.Env, e)
}

func dropEnv(c *corev1.Container, name string) {
	var out []corev1.EnvVar
	for _, e := range c.Env {
		if e.Name != name {
			out = append(out, e)
		}
	}
	c.Env = out
}

func dropMount(c *corev1.Container, path string) {
	var out []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			out = append(out, m)
		}
	}
	c.VolumeMounts = out
}

func secretRef(name, key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}
}

func problems(err error) []string {
	var e *Error
	if errors.As(err, &e) {
		return e.Problems
	}
	return nil
}

func TestRenderedOverlaysPass(t *testing.T) {
	if err := Validate(dev(t), SelfContained()); err != nil {
		t.Errorf("dev overlay: %v", err)
	}
	y, err := render.Build("../../k8s/base")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(y)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(objs, Base()); err != nil {
		t.Errorf("base: %v", err)
	}
	// The base leaves gatehouse-secrets to operators, so it is not
	// self-contained.
	if err := Validate(objs, SelfContained()); err == nil {
		t.Error("base validated as self-contained; want missing Secret gatehouse-secrets")
	}
}

func TestOptionalReferencesMayDangle(t *testing.T) {
	objs := dev(t)
	setEnv(ctr(t, objs, "edge"), corev1.EnvVar{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "otel"}, Key: "endpoint", Optional: ptr.To(true)}}})
	ctr(t, objs, "edge").EnvFrom = append(ctr(t, objs, "edge").EnvFrom, corev1.EnvFromSource{
		SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}, Optional: ptr.To(true)}})
	if err := Validate(objs, SelfContained()); err != nil {
		t.Errorf("got %v; want optional references to be accepted", err)
	}
}

func TestImages(t *testing.T) {
	got := strings.Join(Images(dev(t)), " ")
	want := "gatehouse-authn gatehouse-directory gatehouse-edge gatehouse-tokens postgres:15 redis:7"
	if got != want {
		t.Errorf("got %s; want %s", got, want)
	}
}

// TestValidateRejects: every rule fails on a manifest that breaks it.
func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy func() Policy // default SelfContained
		break_ func(t *testing.T, objs []Object) []Object
		want   string
	}{
		// Probes.
		{"no liveness probe", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "authn").LivenessProbe = nil
			return o
		}, "Deployment authn: container authn: no livenessProbe"},
		{"no readiness probe (datastore)", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "redis").ReadinessProbe = nil
			return o
		}, "Deployment redis: container redis: no readinessProbe"},
		{"liveness not /healthz", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "edge").LivenessProbe.HTTPGet.Path = "/health"
			return o
		}, "container edge: livenessProbe is not an HTTP GET of /healthz"},
		{"readiness not HTTP", nil, func(t *testing.T, o []Object) []Object {
			c := ctr(t, o, "tokens")
			c.ReadinessProbe.HTTPGet = nil
			c.ReadinessProbe.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromString("http")}
			return o
		}, "container tokens: readinessProbe is not an HTTP GET of /readyz"},
		{"no startup probe", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "directory").StartupProbe = nil
			return o
		}, "container directory: no startupProbe"},
		{"probe on unknown port", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "authn").LivenessProbe.HTTPGet.Port = intstr.FromString("nosuchport")
			return o
		}, "livenessProbe port nosuchport is not a container port"},
		{"probe on another port", nil, func(t *testing.T, o []Object) []Object {
			c := ctr(t, o, "authn")
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: "admin", ContainerPort: 9090})
			c.ReadinessProbe.HTTPGet.Port = intstr.FromString("admin")
			return o
		}, "readinessProbe probes port 9090; want 8080"},

		// Resources.
		{"no memory request", nil, func(t *testing.T, o []Object) []Object {
			delete(ctr(t, o, "edge").Resources.Requests, corev1.ResourceMemory)
			return o
		}, "container edge: no resources.requests.memory"},
		{"no cpu limit", nil, func(t *testing.T, o []Object) []Object {
			delete(find[*appsv1.StatefulSet](t, o, "StatefulSet", "postgres").Spec.Template.Spec.Containers[0].Resources.Limits, corev1.ResourceCPU)
			return o
		}, "StatefulSet postgres: container postgres: no resources.limits.cpu"},
		{"request above limit", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "tokens").Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
			return o
		}, "resources.requests.memory 1Gi exceeds the limit 256Mi"},

		// Security context.
		{"runAsNonRoot false", nil, func(t *testing.T, o []Object) []Object {
			deploy(t, o, "edge").SecurityContext.RunAsNonRoot = ptr.To(false)
			return o
		}, "container edge: runAsNonRoot is not true"},
		{"root uid", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "redis").SecurityContext.RunAsUser = ptr.To(int64(0))
			return o
		}, "container redis: runs as uid 0"},
		{"other uid", nil, func(t *testing.T, o []Object) []Object {
			deploy(t, o, "authn").SecurityContext.RunAsUser = ptr.To(int64(1000))
			return o
		}, "container authn: does not run as uid 65532"},
		{"privileged", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "edge").SecurityContext.Privileged = ptr.To(true)
			return o
		}, "container edge: is privileged"},
		{"privilege escalation", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "edge").SecurityContext.AllowPrivilegeEscalation = nil
			return o
		}, "container edge: allowPrivilegeEscalation is not false"},
		{"capabilities kept", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "tokens").SecurityContext.Capabilities.Drop = []corev1.Capability{"NET_RAW"}
			return o
		}, "container tokens: does not drop ALL capabilities"},
		{"capabilities added", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "tokens").SecurityContext.Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
			return o
		}, "container tokens: adds capabilities [NET_BIND_SERVICE]"},
		{"no seccomp profile", nil, func(t *testing.T, o []Object) []Object {
			deploy(t, o, "directory").SecurityContext.SeccompProfile = nil
			return o
		}, "container directory: no RuntimeDefault seccomp profile"},
		{"writable root", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "tokens").SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
			return o
		}, "container tokens: readOnlyRootFilesystem is not true"},
		{"service account token", nil, func(t *testing.T, o []Object) []Object {
			deploy(t, o, "authn").AutomountServiceAccountToken = ptr.To(true)
			return o
		}, "Deployment authn: mounts a service account token"},
		{"service account token via the account", nil, func(t *testing.T, o []Object) []Object {
			deploy(t, o, "edge").AutomountServiceAccountToken = nil
			find[*corev1.ServiceAccount](t, o, "ServiceAccount", "edge").AutomountServiceAccountToken = nil
			return o
		}, "Deployment edge: mounts a service account token"},
		{"default service account", nil, func(t *testing.T, o []Object) []Object {
			deploy(t, o, "edge").ServiceAccountName = ""
			return o
		}, "Deployment edge: no serviceAccountName"},
		{"missing service account", nil, func(t *testing.T, o []Object) []Object {
			return without(o, "ServiceAccount", "tokens")
		}, "Deployment tokens: ServiceAccount \"tokens\" is not rendered"},
		{"no grace period", nil, func(t *testing.T, o []Object) []Object {
			deploy(t, o, "edge").TerminationGracePeriodSeconds = nil
			return o
		}, "Deployment edge: terminationGracePeriodSeconds is not set"},

		// Images.
		{"unpinned image", nil, func(t *testing.T, o []Object) []Object {
			find[*appsv1.StatefulSet](t, o, "StatefulSet", "postgres").Spec.Template.Spec.Containers[0].Image = "postgres"
			return o
		}, `container postgres: image "postgres" is not pinned to a tag`},
		{"latest image", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "redis").Image = "docker.io/library/redis:latest"
			return o
		}, `image "docker.io/library/redis:latest" is not pinned`},
		{"wrong gatehouse image", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "authn").Image = "gatehouse-tokens"
			return o
		}, `container authn: runs image "gatehouse-tokens"; want "gatehouse-authn"`},
		{"gatehouse image elsewhere", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "redis").Image = "gatehouse-edge"
			return o
		}, `container redis: runs Gatehouse image "gatehouse-edge" outside a Deployment named after a service`},

		// Volumes.
		{"undeclared volume", nil, func(t *testing.T, o []Object) []Object {
			c := ctr(t, o, "edge")
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "cache", MountPath: "/cache"})
			return o
		}, `container edge: mounts undeclared volume "cache"`},
		{"no /tmp", nil, func(t *testing.T, o []Object) []Object {
			dropMount(ctr(t, o, "authn"), "/tmp")
			return o
		}, "container authn: no emptyDir mounted at /tmp"},
		{"data dir not mounted", nil, func(t *testing.T, o []Object) []Object {
			dropMount(ctr(t, o, "directory"), "/data")
			return o
		}, `container directory: GATEHOUSE_DATA_DIR "/data" is not a writable emptyDir mount`},
		{"missing secret volume", nil, func(t *testing.T, o []Object) []Object {
			d := deploy(t, o, "edge")
			d.Volumes = append(d.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "edge-tls"}}})
			return o
		}, `Deployment edge: volume tls: Secret "edge-tls" is not rendered`},
		{"no port 8080", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "tokens").Ports[0].ContainerPort = 9000
			return o
		}, "container tokens: does not expose port 8080"},

		// Objects present.
		{"missing deployment", nil, func(t *testing.T, o []Object) []Object {
			return without(o, "Deployment", "directory")
		}, "missing Deployment directory"},
		{"missing service", nil, func(t *testing.T, o []Object) []Object {
			return without(o, "Service", "tokens")
		}, "missing Service tokens"},
		{"missing secret", nil, func(t *testing.T, o []Object) []Object {
			return without(o, "Secret", "gatehouse-secrets")
		}, "missing Secret gatehouse-secrets"},
		{"no ingress", nil, func(t *testing.T, o []Object) []Object {
			return without(o, "Ingress", "edge")
		}, "no Ingress routes to Service edge"},
		{"defined twice", nil, func(t *testing.T, o []Object) []Object {
			for _, x := range o {
				if x.Kind == "ServiceAccount" && x.Name == "edge" {
					return append(o, x)
				}
			}
			return o
		}, "ServiceAccount edge: defined twice"},

		// Selectors.
		{"deployment selector", nil, func(t *testing.T, o []Object) []Object {
			find[*appsv1.Deployment](t, o, "Deployment", "edge").Spec.Selector.MatchLabels["app.kubernetes.io/name"] = "gateway"
			return o
		}, "Deployment edge: selector does not match its pod template labels"},
		{"service selects nothing", nil, func(t *testing.T, o []Object) []Object {
			find[*corev1.Service](t, o, "Service", "authn").Spec.Selector["app.kubernetes.io/name"] = "authentication"
			return o
		}, "Service authn: selector map[app.kubernetes.io/name:authentication] matches no workload's pods"},
		{"service without selector", nil, func(t *testing.T, o []Object) []Object {
			find[*corev1.Service](t, o, "Service", "redis").Spec.Selector = nil
			return o
		}, "Service redis: has no selector"},
		{"service selects another deployment", nil, func(t *testing.T, o []Object) []Object {
			find[*corev1.Service](t, o, "Service", "authn").Spec.Selector["app.kubernetes.io/name"] = "tokens"
			return o
		}, "Service authn: does not select the pods of Deployment authn"},
		{"service target port", nil, func(t *testing.T, o []Object) []Object {
			find[*corev1.Service](t, o, "Service", "directory").Spec.Ports[0].TargetPort = intstr.FromString("grpc")
			return o
		}, "Service directory: port http: targetPort grpc is not a container port of Deployment directory"},
		{"no h2c", nil, func(t *testing.T, o []Object) []Object {
			find[*corev1.Service](t, o, "Service", "tokens").Spec.Ports[0].AppProtocol = nil
			return o
		}, "Service tokens: port http lacks appProtocol kubernetes.io/h2c"},
		{"pdb selects nothing", nil, func(t *testing.T, o []Object) []Object {
			find[*policyv1.PodDisruptionBudget](t, o, "PodDisruptionBudget", "authn").Spec.Selector.MatchLabels["app.kubernetes.io/name"] = "x"
			return o
		}, "PodDisruptionBudget authn: selector matches no workload"},
		{"statefulset service", nil, func(t *testing.T, o []Object) []Object {
			find[*appsv1.StatefulSet](t, o, "StatefulSet", "postgres").Spec.ServiceName = "postgresql"
			return o
		}, `StatefulSet postgres: serviceName "postgresql" is not a rendered Service`},

		// Ingress.
		{"ingress to internal service", nil, func(t *testing.T, o []Object) []Object {
			ing := find[*networkingv1.Ingress](t, o, "Ingress", "edge")
			ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, networkingv1.HTTPIngressPath{
				Path: "/management", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "directory", Port: networkingv1.ServiceBackendPort{Name: "http"}}},
			})
			return o
		}, "Ingress edge: routes to internal Service directory"},
		{"no ingress class", nil, func(t *testing.T, o []Object) []Object {
			find[*networkingv1.Ingress](t, o, "Ingress", "edge").Spec.IngressClassName = nil
			return o
		}, "Ingress edge: no ingressClassName"},
		{"ingress backend port", nil, func(t *testing.T, o []Object) []Object {
			find[*networkingv1.Ingress](t, o, "Ingress", "edge").Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port = networkingv1.ServiceBackendPort{Number: 80}
			return o
		}, "Ingress edge: backend port {Name: Number:80} is not a port of Service edge"},
		{"ingress backend service", nil, func(t *testing.T, o []Object) []Object {
			find[*networkingv1.Ingress](t, o, "Ingress", "edge").Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "gateway"
			return o
		}, `Ingress edge: backend Service "gateway" is not rendered`},
		{"ingress without host", nil, func(t *testing.T, o []Object) []Object {
			find[*networkingv1.Ingress](t, o, "Ingress", "edge").Spec.Rules[0].Host = ""
			return o
		}, "Ingress edge: a rule has no host"},

		{"ingress rule without paths", nil, func(t *testing.T, o []Object) []Object {
			ing := find[*networkingv1.Ingress](t, o, "Ingress", "edge")
			ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: "admin.gatehouse.local"})
			return o
		}, `Ingress edge: rule "admin.gatehouse.local" routes no paths`},
		{"ingress resource backend", nil, func(t *testing.T, o []Object) []Object {
			find[*networkingv1.Ingress](t, o, "Ingress", "edge").Spec.DefaultBackend = &networkingv1.IngressBackend{
				Resource: &corev1.TypedLocalObjectReference{Kind: "StorageBucket", Name: "static"}}
			return o
		}, "Ingress edge: a backend is not a Service"},

		// References.
		{"secret key missing", nil, func(t *testing.T, o []Object) []Object {
			delete(secret(t, o), "ADMIN_PASSWORD")
			return o
		}, `has no key "ADMIN_PASSWORD"`},
		{"config map key missing", nil, func(t *testing.T, o []Object) []Object {
			name := find[*corev1.ConfigMap](t, o, "ConfigMap", "gatehouse-config").Name
			setEnv(ctr(t, o, "edge"), corev1.EnvVar{Name: "GATEHOUSE_RATE_LIMIT", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "RATE"}}})
			return o
		}, `Deployment edge: env GATEHOUSE_RATE_LIMIT: ConfigMap gatehouse-config-`},
		{"envFrom missing", nil, func(t *testing.T, o []Object) []Object {
			ctr(t, o, "authn").EnvFrom[0].ConfigMapRef.Name = "authn-config"
			return o
		}, `Deployment authn: envFrom: ConfigMap "authn-config" is not rendered`},
		{"secret not rendered", Base, func(t *testing.T, o []Object) []Object {
			setEnv(ctr(t, o, "tokens"), corev1.EnvVar{Name: "GATEHOUSE_MASTER_KEY", ValueFrom: secretRef("tokens-keys", "MASTER_KEY")})
			return o
		}, `Deployment tokens: env GATEHOUSE_MASTER_KEY: Secret "tokens-keys" is not rendered`},
		{"external secret key", Base, func(t *testing.T, o []Object) []Object {
			setEnv(ctr(t, o, "tokens"), corev1.EnvVar{Name: "GATEHOUSE_REDIS_PASSWORD", ValueFrom: secretRef("gatehouse-secrets", "REDIS_PASSWORD")})
			return o
		}, `Deployment tokens: env GATEHOUSE_REDIS_PASSWORD: key "REDIS_PASSWORD" is not one operators provide in Secret gatehouse-secrets`},

		// Gatehouse configuration.
		{"no database for a service", nil, func(t *testing.T, o []Object) []Object {
			dropEnv(ctr(t, o, "tokens"), "GATEHOUSE_DATABASE_URL")
			return o
		}, "container tokens: GATEHOUSE_DATABASE_URL is not set"},
		{"edge would embed a service", nil, func(t *testing.T, o []Object) []Object {
			delete(config(t, o), "GATEHOUSE_AUTHN_URL")
			return o
		}, "Deployment edge: container edge: GATEHOUSE_AUTHN_URL is not set"},
		{"no data dir", nil, func(t *testing.T, o []Object) []Object {
			delete(config(t, o), "GATEHOUSE_DATA_DIR")
			return o
		}, "container authn: GATEHOUSE_DATA_DIR is not set (the default ./data is on the read-only root filesystem)"},
		{"service URL bad port", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_TOKENS_URL"] = "http://tokens:http"
			return o
		}, `GATEHOUSE_TOKENS_URL "http://tokens:http": want a URL with scheme http and a host`},
		{"service URL port out of range", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_TOKENS_URL"] = "http://tokens:99999"
			return o
		}, `GATEHOUSE_TOKENS_URL "http://tokens:99999" has an invalid port`},
		{"envFrom secret missing", nil, func(t *testing.T, o []Object) []Object {
			c := ctr(t, o, "edge")
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "edge-extra"}}})
			return o
		}, `Deployment edge: envFrom: Secret "edge-extra" is not rendered`},
		{"no internal token", nil, func(t *testing.T, o []Object) []Object {
			dropEnv(ctr(t, o, "edge"), "GATEHOUSE_INTERNAL_TOKEN")
			return o
		}, "container edge: GATEHOUSE_INTERNAL_TOKEN is not set"},
		{"credential not from a secret", nil, func(t *testing.T, o []Object) []Object {
			setEnv(ctr(t, o, "authn"), corev1.EnvVar{Name: "GATEHOUSE_MASTER_KEY", Value: "REVWLU9OTFkgZ2F0ZWhvdXNlIG1hc3RlciBrZXkhISE="})
			return o
		}, "container authn: GATEHOUSE_MASTER_KEY comes from a literal value; it must come from a Secret"},
		{"credential in the config map", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_ADMIN_PASSWORD"] = "x"
			dropEnv(ctr(t, o, "directory"), "GATEHOUSE_ADMIN_PASSWORD")
			return o
		}, "container directory: GATEHOUSE_ADMIN_PASSWORD comes from ConfigMap gatehouse-config-"},
		{"listen address", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_ADDR"] = ":9090"
			return o
		}, `container edge: GATEHOUSE_ADDR ":9090" does not listen on the container port 8080`},
		{"issuer host", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_ISSUER"] = "http://login.example.com"
			return o
		}, `container tokens: GATEHOUSE_ISSUER host "login.example.com" is not the host of an Ingress rule routing to [edge]`},
		{"issuer scheme", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_ISSUER"] = "gatehouse.local"
			return o
		}, `GATEHOUSE_ISSUER "gatehouse.local" is not an http(s) URL`},
		{"issuer differs", nil, func(t *testing.T, o []Object) []Object {
			setEnv(ctr(t, o, "tokens"), corev1.EnvVar{Name: "GATEHOUSE_ISSUER", Value: "http://gatehouse.local/tokens"})
			return o
		}, "GATEHOUSE_ISSUER differs between processes"},
		{"service URL to the wrong service", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_TOKENS_URL"] = "http://authn:8080"
			return o
		}, `GATEHOUSE_TOKENS_URL "http://authn:8080" points at Service "authn"; want "tokens"`},
		{"service URL port", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_DIRECTORY_URL"] = "http://directory"
			return o
		}, `GATEHOUSE_DIRECTORY_URL "http://directory": Service "directory" has no port 80`},
		{"service URL outside the cluster", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_AUTHN_URL"] = "http://authn.example.com:8080"
			return o
		}, `GATEHOUSE_AUTHN_URL "http://authn.example.com:8080" must name the in-cluster Service authn`},
		{"service URL scheme", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_AUTHN_URL"] = "grpc://authn:8080"
			return o
		}, `GATEHOUSE_AUTHN_URL "grpc://authn:8080": want a URL with scheme http and a host`},
		{"redis service", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_REDIS_URL"] = "redis://valkey.default.svc.cluster.local:6379/0"
			return o
		}, `GATEHOUSE_REDIS_URL "redis://valkey.default.svc.cluster.local:6379/0": no rendered Service "valkey"`},
		{"database URL scheme", nil, func(t *testing.T, o []Object) []Object {
			secret(t, o)["DATABASE_URL"] = []byte("mysql://gatehouse:dev-only-postgres-password@postgres:3306/gatehouse")
			return o
		}, "key DATABASE_URL): want a URL with scheme postgres or postgresql and a host"},
		{"database service port", nil, func(t *testing.T, o []Object) []Object {
			secret(t, o)["DATABASE_URL"] = []byte("postgres://gatehouse:dev-only-postgres-password@postgres:5433/gatehouse")
			return o
		}, `Service "postgres" has no port 5433`},
		{"master key length", nil, func(t *testing.T, o []Object) []Object {
			secret(t, o)["MASTER_KEY"] = []byte("c2hvcnQta2V5")
			return o
		}, "key MASTER_KEY) is not base64 of 32 bytes"},
		{"internal token length", nil, func(t *testing.T, o []Object) []Object {
			secret(t, o)["INTERNAL_TOKEN"] = []byte("too-short")
			return o
		}, "is shorter than 32 characters"},
		{"internal token differs", nil, func(t *testing.T, o []Object) []Object {
			s := secret(t, o)
			s["INTERNAL_TOKEN_2"] = append([]byte("x"), s["INTERNAL_TOKEN"]...)
			name := find[*corev1.Secret](t, o, "Secret", "gatehouse-secrets").Name
			setEnv(ctr(t, o, "tokens"), corev1.EnvVar{Name: "GATEHOUSE_INTERNAL_TOKEN", ValueFrom: secretRef(name, "INTERNAL_TOKEN_2")})
			return o
		}, "GATEHOUSE_INTERNAL_TOKEN differs between processes"},
		{"log level", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_LOG_LEVEL"] = "verbose"
			return o
		}, `GATEHOUSE_LOG_LEVEL "verbose" is not debug, info, warn or error`},
		// NetworkPolicies.
		{"no NetworkPolicy at all", nil, func(t *testing.T, o []Object) []Object {
			return withoutKind(o, "NetworkPolicy")
		}, "Deployment authn: no NetworkPolicy selects its pods"},
		{"a Deployment outside the default-deny without its own policy", nil, func(t *testing.T, o []Object) []Object {
			delete(find[*appsv1.Deployment](t, o, "Deployment", "redis").Spec.Template.Labels, "app.kubernetes.io/part-of")
			return without(o, "NetworkPolicy", "redis")
		}, "Deployment redis: no NetworkPolicy selects its pods"},
		{"only the default-deny: callers locked out", nil, func(t *testing.T, o []Object) []Object {
			return without(o, "NetworkPolicy", "authn")
		}, "Deployment authn: port 8080 does not admit its caller edge"},
		{"internal service open to all", nil, func(t *testing.T, o []Object) []Object {
			netpol(t, o, "authn").Spec.Ingress[0].From = nil
			return o
		}, "Deployment authn: port 8080 admits every source; want only edge"},
		{"internal service open on every port", nil, func(t *testing.T, o []Object) []Object {
			netpol(t, o, "directory").Spec.Ingress = append(netpol(t, o, "directory").Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
			return o
		}, "Deployment directory: port 8080 admits every source"},
		{"caller missing", nil, func(t *testing.T, o []Object) []Object {
			r := &netpol(t, o, "tokens").Spec.Ingress[0]
			r.From = r.From[:2]
			return o
		}, "Deployment tokens: port 8080 does not admit its caller directory"},
		{"not a caller", nil, func(t *testing.T, o []Object) []Object {
			r := &netpol(t, o, "authn").Spec.Ingress[0]
			r.From = append(r.From, podPeer("tokens"))
			return o
		}, "Deployment authn: port 8080 admits tokens, which is not one of its callers (edge)"},
		{"another namespace reaches an internal service", nil, func(t *testing.T, o []Object) []Object {
			r := &netpol(t, o, "directory").Spec.Ingress[0]
			r.From = append(r.From, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}})
			return o
		}, "Deployment directory: port 8080 admits namespaces team=x from outside the namespace; want only edge, authn, tokens"},
		{"an address block reaches an internal service", nil, func(t *testing.T, o []Object) []Object {
			r := &netpol(t, o, "tokens").Spec.Ingress[0]
			r.From = append(r.From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}})
			return o
		}, "Deployment tokens: port 8080 admits every source"},
		{"edge open to every pod", nil, func(t *testing.T, o []Object) []Object {
			netpol(t, o, "edge").Spec.Ingress[0].From = nil
			return o
		}, "Deployment edge: port 8080 admits every source; want only the ingress controller's namespace"},
		{"edge open to a workload of its namespace", nil, func(t *testing.T, o []Object) []Object {
			r := &netpol(t, o, "edge").Spec.Ingress[0]
			r.From = append(r.From, podPeer("tokens"))
			return o
		}, "Deployment edge: port 8080 admits namespaces kubernetes.io/metadata.name=ingress-nginx, tokens; want only the ingress controller's namespace"},
		{"edge policy on another port", nil, func(t *testing.T, o []Object) []Object {
			netpol(t, o, "edge").Spec.Ingress[0].Ports[0].Port = ptr.To(intstr.FromInt32(8443))
			return o
		}, "Deployment edge: port 8080 admits nothing; want only the ingress controller's namespace"},
		{"metrics open to all", nil, func(t *testing.T, o []Object) []Object {
			netpol(t, o, "gatehouse-metrics").Spec.Ingress[0].From = nil
			return o
		}, "Deployment tokens: port metrics admits every source"},
		{"metrics closed", nil, func(t *testing.T, o []Object) []Object {
			return without(o, "NetworkPolicy", "gatehouse-metrics")
		}, "Deployment edge: port metrics admits nothing"},
		{"datastore reached by a service without a database", nil, func(t *testing.T, o []Object) []Object {
			r := &netpol(t, o, "postgres").Spec.Ingress[0]
			r.From = append(r.From, podPeer("edge"))
			return o
		}, "StatefulSet postgres: port 5432 admits edge, which is not one of its callers (authn, tokens, directory)"},
		{"redis locked to tokens only", nil, func(t *testing.T, o []Object) []Object {
			r := &netpol(t, o, "redis").Spec.Ingress[0]
			r.From = r.From[1:]
			return o
		}, "Deployment redis: port 6379 does not admit its caller edge"},
		{"policy selects nothing", nil, func(t *testing.T, o []Object) []Object {
			netpol(t, o, "authn").Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] = "auth"
			return o
		}, "NetworkPolicy authn: podSelector matches no workload's pods"},
		{"peer selects nothing", nil, func(t *testing.T, o []Object) []Object {
			netpol(t, o, "tokens").Spec.Ingress[0].From[0] = podPeer("edg")
			return o
		}, "NetworkPolicy tokens: an ingress rule admits the pods of no workload (podSelector app.kubernetes.io/name=edg)"},
		{"named port does not exist", nil, func(t *testing.T, o []Object) []Object {
			netpol(t, o, "directory").Spec.Ingress[0].Ports[0].Port = ptr.To(intstr.FromString("htp"))
			return o
		}, "NetworkPolicy directory: port htp is not a container port of the pods it selects"},
		{"no callers listed for a service", func() Policy {
			p := SelfContained()
			p.Callers = map[string][]string{}
			return p
		}, func(t *testing.T, o []Object) []Object { return o }, "the policy lists no callers for Gatehouse service tokens"},
		{"trusted proxies", nil, func(t *testing.T, o []Object) []Object {
			config(t, o)["GATEHOUSE_TRUSTED_PROXIES"] = "10.0.0.0/8,cluster"
			return o
		}, `GATEHOUSE_TRUSTED_PROXIES: "cluster" is not a CIDR`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := SelfContained
			if tc.policy != nil {
				policy = tc.policy
			}
			objs := tc.break_(t, dev(t))
			if _, external := policy().ExternalSecrets["gatehouse-secrets"]; external {
				objs = without(objs, "Secret", "gatehouse-secrets")
				// Point the references back at the external, unhashed name.
				for _, svc := range []string{"edge", "authn", "tokens", "directory"} {
					for i, e := range ctr(t, objs, svc).Env {
						if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && strings.HasPrefix(r.SecretKeyRef.Name, "gatehouse-secrets-") {
							ctr(t, objs, svc).Env[i].ValueFrom.SecretKeyRef.Name = "gatehouse-secrets"
						}
					}
				}
				objs = without(objs, "StatefulSet", "postgres") // it reads gatehouse-secrets too
			}
			err := Validate(objs, policy())
			if err == nil {
				t.Fatalf("got no error; want one containing %q", tc.want)
			}
			var found bool
			for _, p := range problems(err) {
				found = found || strings.Contains(p, tc.want)
			}
			if !found {
				t.Fatalf("got %v\nwant a problem containing %q", err, tc.want)
			}
			for _, secretValue := range []string{"dev-only-postgres-password", "REVWLU9OTFkgZ2F0ZWhvdXNlIG1hc3RlciBrZXkhISE=", "dev-only-internal-token", "c2hvcnQta2V5", "too-short"} {
				if strings.Contains(err.Error(), secretValue) && !strings.Contains(tc.want, secretValue) {
					t.Errorf("the error reveals a secret value %q: %v", secretValue, err)
				}
			}
		})
	}
}
