package manifest

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// checkWorkload applies the pod rules to a Deployment or StatefulSet, and
// the Gatehouse process rules to each container running a Gatehouse image.
func (v *validator) checkWorkload(w workload) {
	spec := &w.pod.Spec
	if s, err := metav1.LabelSelectorAsSelector(w.selector); err != nil || s.Empty() || !s.Matches(labels.Set(w.pod.Labels)) {
		v.failf(w.Object, "selector does not match its pod template labels")
	}
	if spec.TerminationGracePeriodSeconds == nil {
		v.failf(w.Object, "terminationGracePeriodSeconds is not set")
	}

	automount := spec.AutomountServiceAccountToken
	if spec.ServiceAccountName == "" {
		v.failf(w.Object, "no serviceAccountName (pods would run as the namespace's default account)")
	} else if o, ok := v.lookup("ServiceAccount", w.Namespace, spec.ServiceAccountName); !ok {
		v.failf(w.Object, "ServiceAccount %q is not rendered", spec.ServiceAccountName)
	} else if automount == nil {
		automount = o.Obj.(*corev1.ServiceAccount).AutomountServiceAccountToken
	}
	if automount == nil || *automount {
		v.failf(w.Object, "mounts a service account token (set automountServiceAccountToken: false)")
	}

	volumes := slices.Clone(w.claims)
	for _, vol := range spec.Volumes {
		volumes = append(volumes, vol.Name)
		v.checkVolumeRefs(w, vol)
	}
	for _, c := range spec.InitContainers {
		v.checkContainer(w, c, volumes, false)
	}
	for _, c := range spec.Containers {
		v.checkContainer(w, c, volumes, true)
	}
}

func (v *validator) checkContainer(w workload, c corev1.Container, volumes []string, probed bool) {
	pod := w.pod.Spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	fail := func(format string, args ...any) {
		v.failf(w.Object, "container "+c.Name+": "+format, args...)
	}

	gatehouse := v.p.isGatehouseImage(c.Image)
	if !gatehouse && !pinned(c.Image) {
		fail("image %q is not pinned to a tag", c.Image)
	}

	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := c.Resources.Requests[res]
		lim, hasLim := c.Resources.Limits[res]
		if !hasReq {
			fail("no resources.requests.%s", res)
		}
		if !hasLim {
			fail("no resources.limits.%s", res)
		}
		if hasReq && hasLim && req.Cmp(lim) > 0 {
			fail("resources.requests.%s %s exceeds the limit %s", res, req.String(), lim.String())
		}
	}

	nonRoot := firstBool(sc.RunAsNonRoot, pod.RunAsNonRoot)
	if nonRoot == nil || !*nonRoot {
		fail("runAsNonRoot is not true")
	}
	uid := firstInt(sc.RunAsUser, pod.RunAsUser)
	if uid != nil && *uid == 0 {
		fail("runs as uid 0")
	}
	if sc.Privileged != nil && *sc.Privileged {
		fail("is privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		fail("allowPrivilegeEscalation is not false")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		fail("does not drop ALL capabilities")
	} else if len(sc.Capabilities.Add) > 0 {
		fail("adds capabilities %v", sc.Capabilities.Add)
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = pod.SeccompProfile
	}
	if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
		fail("no RuntimeDefault seccomp profile")
	}

	for _, m := range c.VolumeMounts {
		if !slices.Contains(volumes, m.Name) {
			fail("mounts undeclared volume %q", m.Name)
		}
	}
	if probed {
		if c.LivenessProbe == nil {
			fail("no livenessProbe")
		}
		if c.ReadinessProbe == nil {
			fail("no readinessProbe")
		}
	}
	for name, pr := range map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe} {
		if port, ok := probePort(pr); ok {
			if _, found := containerPort(c, port); !found {
				fail("%s port %s is not a container port", name, port.String())
			}
		}
	}
	env := v.environment(w, c)
	if gatehouse {
		v.checkGatehouseContainer(w, c, uid, env, fail)
	}
}

// checkGatehouseContainer: the rules for a Gatehouse process beyond those
// every container follows.
func (v *validator) checkGatehouseContainer(w workload, c corev1.Container, uid *int64, env map[string]envValue, fail func(string, ...any)) {
	if w.Kind != "Deployment" || !v.p.isService(w.Name) {
		fail("runs Gatehouse image %q outside a Deployment named after a service %v", c.Image, v.p.Services)
		return
	}
	if want := v.p.ImagePrefix + w.Name; c.Image != want {
		fail("runs image %q; want %q", c.Image, want)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		fail("readOnlyRootFilesystem is not true")
	}
	if uid == nil || *uid != v.p.RunAsUser {
		fail("does not run as uid %d", v.p.RunAsUser)
	}
	if c.StartupProbe == nil {
		fail("no startupProbe")
	}
	if _, found := containerPort(c, intstr.FromInt32(v.p.ContainerPort)); !found {
		fail("does not expose port %d", v.p.ContainerPort)
	}
	for _, want := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
	} {
		if want.probe == nil {
			continue // reported above
		}
		get := want.probe.HTTPGet
		if get == nil || get.Path != want.path {
			fail("%s is not an HTTP GET of %s", want.name, want.path)
			continue
		}
		if n, ok := containerPort(c, get.Port); ok && n != v.p.ContainerPort {
			fail("%s probes port %d; want %d", want.name, n, v.p.ContainerPort)
		}
	}
	if !v.emptyDirAt(w, c, "/tmp") {
		fail("no emptyDir mounted at /tmp (the root filesystem is read-only)")
	}
	v.procs = append(v.procs, &process{w: w, c: c, env: env})
}

// emptyDirAt reports whether c mounts an emptyDir volume at path.
func (v *validator) emptyDirAt(w workload, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path || m.ReadOnly {
			continue
		}
		for _, vol := range w.pod.Spec.Volumes {
			if vol.Name == m.Name && vol.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

// checkVolumeRefs: ConfigMap and Secret volumes resolve.
func (v *validator) checkVolumeRefs(w workload, vol corev1.Volume) {
	switch {
	case vol.ConfigMap != nil:
		if !isTrue(vol.ConfigMap.Optional) {
			v.requireObject(w, "ConfigMap", vol.ConfigMap.Name, "volume "+vol.Name)
		}
	case vol.Secret != nil:
		if !isTrue(vol.Secret.Optional) {
			v.requireObject(w, "Secret", vol.Secret.SecretName, "volume "+vol.Name)
		}
	}
}

// pinned reports whether a third-party image names a tag or digest other
// than latest.
func pinned(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return true
	}
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	return colon > slash && image[colon+1:] != "latest"
}

func probePort(p *corev1.Probe) (intstr.IntOrString, bool) {
	switch {
	case p == nil:
	case p.HTTPGet != nil:
		return p.HTTPGet.Port, true
	case p.TCPSocket != nil:
		return p.TCPSocket.Port, true
	case p.GRPC != nil:
		return intstr.FromInt32(p.GRPC.Port), true
	}
	return intstr.IntOrString{}, false
}

// containerPort resolves a port by name or number against c's ports.
func containerPort(c corev1.Container, port intstr.IntOrString) (int32, bool) {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) ||
			(port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

func firstBool(a, b *bool) *bool {
	if a != nil {
		return a
	}
	return b
}

func firstInt(a, b *int64) *int64 {
	if a != nil {
		return a
	}
	return b
}

func isTrue(b *bool) bool { return b != nil && *b }
