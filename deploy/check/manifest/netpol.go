package manifest

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// MetricsPort names the container port of /metrics (GATEHOUSE_METRICS_ADDR).
const MetricsPort = "metrics"

// sources are who a NetworkPolicy set admits to one port of a workload.
type sources struct {
	// any: every source (no policy isolates the pod, or a rule admits all).
	any bool
	// external describes admitted peers outside the namespace's workloads:
	// other namespaces, address blocks.
	external []string
	// workloads are the names of the namespace's workloads admitted.
	workloads map[string]bool
}

func (s sources) String() string {
	if s.any {
		return "every source"
	}
	parts := slices.Clone(s.external)
	for w := range s.workloads {
		parts = append(parts, w)
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// checkNetworkPolicy: a policy selects pods, its peers name pods, and its
// named ports exist, so a typo cannot silently admit nothing or everything.
func (v *validator) checkNetworkPolicy(o Object, np *networkingv1.NetworkPolicy) {
	targets := v.matching(o.Namespace, &np.Spec.PodSelector)
	if len(targets) == 0 {
		v.failf(o, "podSelector matches no workload's pods")
	}
	for _, rule := range np.Spec.Ingress {
		for _, peer := range rule.From {
			if peer.PodSelector != nil && peer.NamespaceSelector == nil && len(v.matching(o.Namespace, peer.PodSelector)) == 0 {
				v.failf(o, "an ingress rule admits the pods of no workload (podSelector %s)", selectorString(peer.PodSelector))
			}
		}
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.Type != intstr.String || len(targets) == 0 {
				continue
			}
			found := false
			for _, w := range targets {
				found = found || podHasPort(w, *p.Port)
			}
			if !found {
				v.failf(o, "port %s is not a container port of the pods it selects", p.Port.StrVal)
			}
		}
	}
}

// checkNetworkIsolation: every workload is selected by a NetworkPolicy for
// ingress (the namespace-wide default-deny, at least), and what the
// policies admit matches the policy: public Gatehouse services from the
// ingress controller's namespace on their port, every other listed workload from exactly its
// callers, /metrics from somewhere but never from everywhere.
func (v *validator) checkNetworkIsolation() {
	for _, w := range v.workloads {
		if len(v.ingressPolicies(w)) == 0 {
			v.failf(w.Object, "no NetworkPolicy selects its pods (every pod in the cluster may connect to them)")
			continue
		}
		name := w.pod.Labels["app.kubernetes.io/name"]
		if name == "" {
			name = w.Name
		}
		serving, ok := v.servingPort(w)
		if !ok {
			continue
		}
		got := v.admitted(w, serving)
		where := fmt.Sprintf("port %d", serving.ContainerPort)
		switch callers, listed := v.p.Callers[name]; {
		case v.p.isPublic(name):
			// The public entry believes X-Forwarded-For from trusted
			// proxies, which are pod addresses: only the ingress
			// controller's namespace may reach it, never any pod.
			switch {
			case got.any:
				v.failf(w.Object, "%s admits every source; want only the ingress controller's namespace (any pod could name any client address to edge's trusted-proxy rule)", where)
			case len(got.workloads) > 0 || len(got.external) == 0:
				v.failf(w.Object, "%s admits %s; want only the ingress controller's namespace (it is the public entry)", where, got)
			}
		case listed:
			want := strings.Join(callers, ", ")
			if got.any {
				v.failf(w.Object, "%s admits every source; want only %s", where, want)
				break
			}
			if len(got.external) > 0 {
				v.failf(w.Object, "%s admits %s from outside the namespace; want only %s", where, strings.Join(got.external, ", "), want)
				break
			}
			for c := range got.workloads {
				if !slices.Contains(callers, c) {
					v.failf(w.Object, "%s admits %s, which is not one of its callers (%s)", where, c, want)
				}
			}
			for _, c := range callers {
				if !got.workloads[c] && v.anyNamed("Deployment", c) {
					v.failf(w.Object, "%s does not admit its caller %s", where, c)
				}
			}
		case v.p.isService(name):
			v.failf(w.Object, "the policy lists no callers for Gatehouse service %s", name)
		}
		for _, c := range w.pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name != MetricsPort {
					continue
				}
				switch m := v.admitted(w, p); {
				case m.any:
					v.failf(w.Object, "port %s admits every source; want only the monitoring namespace", MetricsPort)
				case len(m.external) == 0 && len(m.workloads) == 0:
					v.failf(w.Object, "port %s admits nothing; Prometheus cannot scrape it", MetricsPort)
				}
			}
		}
	}
}

// servingPort is the port a workload serves on: the Gatehouse container
// port, else its first container's first port.
func (v *validator) servingPort(w workload) (corev1.ContainerPort, bool) {
	for _, c := range w.pod.Spec.Containers {
		for _, p := range c.Ports {
			if v.p.isGatehouseImage(c.Image) && p.ContainerPort == v.p.ContainerPort {
				return p, true
			}
		}
	}
	for _, c := range w.pod.Spec.Containers {
		if len(c.Ports) > 0 {
			return c.Ports[0], true
		}
	}
	return corev1.ContainerPort{}, false
}

// ingressPolicies returns the NetworkPolicies that isolate w's pods for
// ingress.
func (v *validator) ingressPolicies(w workload) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, o := range v.objs {
		np, ok := o.Obj.(*networkingv1.NetworkPolicy)
		if !ok || o.Namespace != w.Namespace || !forIngress(np) {
			continue
		}
		if s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err == nil && s.Matches(labels.Set(w.pod.Labels)) {
			out = append(out, np)
		}
	}
	return out
}

// forIngress: without policyTypes a policy always restricts ingress.
func forIngress(np *networkingv1.NetworkPolicy) bool {
	return len(np.Spec.PolicyTypes) == 0 || slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
}

// admitted evaluates the NetworkPolicies for connections to port of w's
// pods, as a network plugin does: the union of every rule of every policy
// that selects the pods, or every source when none does.
func (v *validator) admitted(w workload, port corev1.ContainerPort) sources {
	s := sources{workloads: map[string]bool{}}
	policies := v.ingressPolicies(w)
	if len(policies) == 0 {
		s.any = true
		return s
	}
	for _, np := range policies {
		for _, rule := range np.Spec.Ingress {
			if !portMatches(rule.Ports, port) {
				continue
			}
			if len(rule.From) == 0 {
				s.any = true
				continue
			}
			for _, peer := range rule.From {
				v.addPeer(&s, w.Namespace, peer)
			}
		}
	}
	return s
}

func (v *validator) addPeer(s *sources, ns string, peer networkingv1.NetworkPolicyPeer) {
	switch {
	case peer.IPBlock != nil:
		if peer.IPBlock.CIDR == "0.0.0.0/0" || peer.IPBlock.CIDR == "::/0" {
			s.any = true
			return
		}
		s.external = append(s.external, "ipBlock "+peer.IPBlock.CIDR)
	case peer.NamespaceSelector != nil:
		if emptySelector(peer.NamespaceSelector) && (peer.PodSelector == nil || emptySelector(peer.PodSelector)) {
			s.any = true
			return
		}
		d := "namespaces " + selectorString(peer.NamespaceSelector)
		if peer.PodSelector != nil {
			d += " pods " + selectorString(peer.PodSelector)
		}
		s.external = append(s.external, d)
	case peer.PodSelector != nil:
		for _, w := range v.matching(ns, peer.PodSelector) {
			name := w.pod.Labels["app.kubernetes.io/name"]
			if name == "" {
				name = w.Name
			}
			s.workloads[name] = true
		}
	}
}

// portMatches reports whether a rule's ports cover port (none: all ports).
func portMatches(ports []networkingv1.NetworkPolicyPort, port corev1.ContainerPort) bool {
	if len(ports) == 0 {
		return true
	}
	proto := port.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	for _, p := range ports {
		pp := corev1.ProtocolTCP
		if p.Protocol != nil {
			pp = *p.Protocol
		}
		if pp != proto {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.String:
			if p.Port.StrVal == port.Name {
				return true
			}
		case p.EndPort != nil:
			if port.ContainerPort >= p.Port.IntVal && port.ContainerPort <= *p.EndPort {
				return true
			}
		case p.Port.IntVal == port.ContainerPort:
			return true
		}
	}
	return false
}

// matching returns the workloads in ns whose pods sel matches; an empty
// selector matches them all.
func (v *validator) matching(ns string, sel *metav1.LabelSelector) []workload {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil
	}
	var out []workload
	for _, w := range v.workloads {
		if w.Namespace == ns && s.Matches(labels.Set(w.pod.Labels)) {
			out = append(out, w)
		}
	}
	return out
}

func emptySelector(sel *metav1.LabelSelector) bool {
	return len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0
}

func selectorString(sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "(invalid)"
	}
	if s.Empty() {
		return "{}"
	}
	return s.String()
}
