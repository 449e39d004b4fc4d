package manifest

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// envValue is one environment variable as a container will see it.
type envValue struct {
	value  string
	known  bool   // false: held by an external Secret or filled at run time
	source string // for messages; never the value itself
	secret bool   // comes from a Secret
}

// environment resolves c's env and envFrom against the rendered objects,
// reporting every reference that does not resolve.
func (v *validator) environment(w workload, c corev1.Container) map[string]envValue {
	env := map[string]envValue{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			v.envFrom(w, env, "ConfigMap", from.ConfigMapRef.Name, from.Prefix, isTrue(from.ConfigMapRef.Optional))
		case from.SecretRef != nil:
			v.envFrom(w, env, "Secret", from.SecretRef.Name, from.Prefix, isTrue(from.SecretRef.Optional))
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = envValue{value: e.Value, known: true, source: "a literal value"}
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			if val, ok := v.refKey(w, "Secret", r.Name, r.Key, isTrue(r.Optional), "env "+e.Name); ok {
				env[e.Name] = val
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			if val, ok := v.refKey(w, "ConfigMap", r.Name, r.Key, isTrue(r.Optional), "env "+e.Name); ok {
				env[e.Name] = val
			}
		default: // fieldRef, resourceFieldRef: filled in by the kubelet
			env[e.Name] = envValue{source: "the downward API"}
		}
	}
	return env
}

func (v *validator) envFrom(w workload, env map[string]envValue, kind, name, prefix string, optional bool) {
	o, ok := v.lookup(kind, w.Namespace, name)
	if !ok {
		if !optional {
			v.requireObject(w, kind, name, "envFrom")
		}
		return
	}
	for k, val := range objectData(o) {
		env[prefix+k] = envValue{value: val, known: true, source: kind + " " + name + " key " + k, secret: kind == "Secret"}
	}
}

// refKey resolves one key of a ConfigMap or Secret.
func (v *validator) refKey(w workload, kind, name, key string, optional bool, what string) (envValue, bool) {
	source := kind + " " + name + " key " + key
	o, ok := v.lookup(kind, w.Namespace, name)
	if !ok {
		if keys, external := v.p.ExternalSecrets[name]; external && kind == "Secret" {
			if !slices.Contains(keys, key) {
				v.failf(w.Object, "%s: key %q is not one operators provide in Secret %s %v", what, key, name, keys)
				return envValue{}, false
			}
			return envValue{source: source, secret: true}, true
		}
		if !optional {
			v.failf(w.Object, "%s: %s %q is not rendered", what, kind, name)
		}
		return envValue{}, false
	}
	val, ok := objectData(o)[key]
	if !ok {
		if !optional {
			v.failf(w.Object, "%s: %s %s has no key %q", what, kind, name, key)
		}
		return envValue{}, false
	}
	return envValue{value: val, known: true, source: source, secret: kind == "Secret"}, true
}

// requireObject reports a reference to a ConfigMap or Secret that is
// neither rendered nor an external Secret.
func (v *validator) requireObject(w workload, kind, name, what string) {
	if _, ok := v.lookup(kind, w.Namespace, name); ok {
		return
	}
	if _, external := v.p.ExternalSecrets[name]; external && kind == "Secret" {
		return
	}
	v.failf(w.Object, "%s: %s %q is not rendered", what, kind, name)
}

func objectData(o Object) map[string]string {
	out := map[string]string{}
	switch x := o.Obj.(type) {
	case *corev1.ConfigMap:
		for k, val := range x.Data {
			out[k] = val
		}
		for k, val := range x.BinaryData {
			out[k] = string(val)
		}
	case *corev1.Secret:
		for k, val := range x.Data {
			out[k] = string(val)
		}
		for k, val := range x.StringData {
			out[k] = val
		}
	}
	return out
}

// process is one Gatehouse container and the environment it will see.
type process struct {
	w   workload
	c   corev1.Container
	env map[string]envValue
}

// Environment variables whose values are credentials: they must come from
// a Secret, and their values never appear in a message.
var secretEnv = []string{"GATEHOUSE_MASTER_KEY", "GATEHOUSE_INTERNAL_TOKEN", "GATEHOUSE_DATABASE_URL", "GATEHOUSE_ADMIN_PASSWORD"}

// shared must be the same for every process: one issuer, one master key
// (every replica decrypts what another encrypted), one internal credential.
var shared = []string{"GATEHOUSE_ISSUER", "GATEHOUSE_MASTER_KEY", "GATEHOUSE_INTERNAL_TOKEN"}

// serviceURLEnv names the variable that points at a Gatehouse service.
func serviceURLEnv(svc string) string { return "GATEHOUSE_" + strings.ToUpper(svc) + "_URL" }

// requiredEnv lists, per process, the variables it must receive and why.
// It mirrors pkg/config.Load for the distributed mode, plus what
// replicated pods need (a shared database instead of per-pod SQLite).
func (v *validator) requiredEnv(svc string) map[string]string {
	req := map[string]string{
		"GATEHOUSE_ISSUER":         "the public URL must be the Ingress host",
		"GATEHOUSE_DATA_DIR":       "the default ./data is on the read-only root filesystem",
		"GATEHOUSE_INTERNAL_TOKEN": "internal calls cross the network",
	}
	peers := map[string][]string{
		"edge":      {"authn", "tokens", "directory"},
		"authn":     {"directory", "tokens"},
		"tokens":    {"directory"},
		"directory": {"tokens"},
	}
	for _, peer := range peers[svc] {
		if v.p.isService(peer) {
			req[serviceURLEnv(peer)] = "it calls " + peer + " (edge: otherwise it would embed " + peer + ")"
		}
	}
	if svc != "edge" {
		req["GATEHOUSE_DATABASE_URL"] = "replicas must share PostgreSQL, not keep SQLite files in their pods"
		req["GATEHOUSE_MASTER_KEY"] = "required with a database; every replica must share it"
	}
	return req
}

func (v *validator) checkProcesses() {
	hosts := v.publicHosts()
	for _, pr := range v.procs {
		v.checkProcess(pr, hosts)
	}
	for _, name := range shared {
		sources := map[string][]string{}
		values := map[string]int{} // numbers distinct values, so none is printed
		for _, pr := range v.procs {
			if e, ok := pr.env[name]; ok {
				id := e.source
				if e.known {
					if _, seen := values[e.value]; !seen {
						values[e.value] = len(values) + 1
					}
					id += fmt.Sprintf(" (value %d)", values[e.value])
				}
				sources[id] = append(sources[id], pr.w.Name)
			}
		}
		if len(sources) > 1 {
			v.fail("%s differs between processes: %v", name, sources)
		}
	}
}

func (v *validator) checkProcess(pr *process, hosts map[string]bool) {
	svc := pr.w.Name
	fail := func(format string, args ...any) {
		v.failf(pr.w.Object, "container "+pr.c.Name+": "+format, args...)
	}
	for name, why := range v.requiredEnv(svc) {
		if _, ok := pr.env[name]; !ok {
			fail("%s is not set (%s)", name, why)
		}
	}
	for _, name := range secretEnv {
		if e, ok := pr.env[name]; ok && !e.secret {
			fail("%s comes from %s; it must come from a Secret", name, e.source)
		}
	}
	get := func(name string) (envValue, bool) {
		e, ok := pr.env[name]
		return e, ok && e.known
	}

	addr := envValue{value: ":8080", known: true}
	if e, ok := pr.env["GATEHOUSE_ADDR"]; ok {
		addr = e
	}
	if addr.known {
		_, port, err := net.SplitHostPort(addr.value)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || int32(n) != v.p.ContainerPort {
			fail("GATEHOUSE_ADDR %q does not listen on the container port %d", addr.value, v.p.ContainerPort)
		}
	}
	if e, ok := get("GATEHOUSE_DATA_DIR"); ok && !v.emptyDirAt(pr.w, pr.c, e.value) {
		fail("GATEHOUSE_DATA_DIR %q is not a writable emptyDir mount", e.value)
	}
	if e, ok := get("GATEHOUSE_ISSUER"); ok {
		u, err := url.Parse(e.value)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https"):
			fail("GATEHOUSE_ISSUER %q is not an http(s) URL", e.value)
		case !hosts[u.Hostname()]:
			fail("GATEHOUSE_ISSUER host %q is not the host of an Ingress rule routing to %v", u.Hostname(), v.p.Public)
		}
	}
	for _, peer := range v.p.Services {
		if e, ok := get(serviceURLEnv(peer)); ok {
			v.checkURL(pr, fail, serviceURLEnv(peer), e, []string{"http"}, 80, peer)
		}
	}
	if e, ok := get("GATEHOUSE_REDIS_URL"); ok {
		v.checkURL(pr, fail, "GATEHOUSE_REDIS_URL", e, []string{"redis", "rediss"}, 6379, "")
	}
	if e, ok := get("GATEHOUSE_DATABASE_URL"); ok {
		v.checkURL(pr, fail, "GATEHOUSE_DATABASE_URL", e, []string{"postgres", "postgresql"}, 5432, "")
	}
	if e, ok := get("GATEHOUSE_MASTER_KEY"); ok {
		if b, err := base64.StdEncoding.DecodeString(e.value); err != nil || len(b) != 32 {
			fail("GATEHOUSE_MASTER_KEY (%s) is not base64 of 32 bytes", e.source)
		}
	}
	if e, ok := get("GATEHOUSE_INTERNAL_TOKEN"); ok && len(e.value) < 32 {
		fail("GATEHOUSE_INTERNAL_TOKEN (%s) is shorter than 32 characters", e.source)
	}
	if e, ok := get("GATEHOUSE_LOG_LEVEL"); ok && !slices.Contains([]string{"debug", "info", "warn", "error"}, strings.ToLower(e.value)) {
		fail("GATEHOUSE_LOG_LEVEL %q is not debug, info, warn or error", e.value)
	}
	if e, ok := get("GATEHOUSE_TRUSTED_PROXIES"); ok {
		for _, s := range strings.Split(e.value, ",") {
			s = strings.TrimSpace(s)
			if _, err := netip.ParsePrefix(s); err != nil {
				if _, aerr := netip.ParseAddr(s); aerr != nil {
					fail("GATEHOUSE_TRUSTED_PROXIES: %q is not a CIDR", s)
				}
			}
		}
	}
}

// checkURL: a URL variable parses with an expected scheme and, when its host
// is a cluster-local name, names a rendered Service (wantService, if set)
// that exposes the port.
func (v *validator) checkURL(pr *process, fail func(string, ...any), name string, e envValue, schemes []string, defPort int32, wantService string) {
	shown := fmt.Sprintf("%q", e.value)
	if e.secret {
		shown = "(" + e.source + ")"
	}
	u, err := url.Parse(e.value)
	if err != nil || !slices.Contains(schemes, u.Scheme) || u.Hostname() == "" {
		fail("%s %s: want a URL with scheme %s and a host", name, shown, strings.Join(schemes, " or "))
		return
	}
	svc, local := clusterLocal(u.Hostname())
	if !local {
		if wantService != "" {
			fail("%s %s must name the in-cluster Service %s", name, shown, wantService)
		}
		return
	}
	if wantService != "" && svc != wantService {
		fail("%s %s points at Service %q; want %q", name, shown, svc, wantService)
	}
	port := defPort
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			fail("%s %s has an invalid port", name, shown)
			return
		}
		port = int32(n)
	}
	exists, hasPort := v.servicePort(pr.w.Namespace, svc, port)
	switch {
	case !exists:
		fail("%s %s: no rendered Service %q", name, shown, svc)
	case !hasPort:
		fail("%s %s: Service %q has no port %d", name, shown, svc, port)
	}
}

// clusterLocal returns the Service name of an in-cluster host: a bare name
// or name.namespace.svc[.cluster.local].
func clusterLocal(host string) (string, bool) {
	if !strings.Contains(host, ".") {
		return host, true
	}
	if strings.HasSuffix(host, ".svc") || strings.HasSuffix(host, ".svc.cluster.local") {
		name, _, _ := strings.Cut(host, ".")
		return name, true
	}
	return "", false
}
