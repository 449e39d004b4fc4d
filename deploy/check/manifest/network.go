package manifest

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// AppProtocolH2C marks a Service port that speaks HTTP/2 over cleartext
// with prior knowledge, as edge and the services do among themselves.
const AppProtocolH2C = "kubernetes.io/h2c"

func (v *validator) checkService(o Object, s *corev1.Service) {
	if len(s.Spec.Selector) == 0 {
		v.failf(o, "has no selector")
		return
	}
	pods := v.selected(o.Namespace, &metav1.LabelSelector{MatchLabels: s.Spec.Selector})
	if len(pods) == 0 {
		v.failf(o, "selector %v matches no workload's pods", s.Spec.Selector)
		return
	}
	if v.p.isService(o.Name) {
		found := false
		for _, w := range pods {
			found = found || (w.Kind == "Deployment" && w.Name == o.Name)
		}
		if !found {
			v.failf(o, "does not select the pods of Deployment %s", o.Name)
		}
	}
	for _, port := range s.Spec.Ports {
		target := port.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(port.Port)
		}
		for _, w := range pods {
			if !podHasPort(w, target) {
				v.failf(o, "port %s: targetPort %s is not a container port of %s", port.Name, target.String(), w.Object)
			}
		}
		if v.p.isService(o.Name) && !v.p.isPublic(o.Name) &&
			(port.AppProtocol == nil || *port.AppProtocol != AppProtocolH2C) {
			v.failf(o, "port %s lacks appProtocol %s (internal services speak h2c)", port.Name, AppProtocolH2C)
		}
	}
}

func podHasPort(w workload, port intstr.IntOrString) bool {
	for _, c := range w.pod.Spec.Containers {
		if _, ok := containerPort(c, port); ok {
			return true
		}
	}
	return false
}

func (v *validator) checkIngress(o Object, ing *networkingv1.Ingress) {
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName == "" {
		v.failf(o, "no ingressClassName")
	}
	for _, b := range ingressBackends(ing) {
		v.checkBackend(o, b)
	}
	for _, r := range ing.Spec.Rules {
		if r.Host == "" {
			v.failf(o, "a rule has no host")
		}
		if r.HTTP == nil || len(r.HTTP.Paths) == 0 {
			v.failf(o, "rule %q routes no paths", r.Host)
		}
	}
}

func (v *validator) checkBackend(o Object, b networkingv1.IngressBackend) {
	if b.Service == nil {
		v.failf(o, "a backend is not a Service")
		return
	}
	name := b.Service.Name
	if v.p.isService(name) && !v.p.isPublic(name) {
		v.failf(o, "routes to internal Service %s", name)
	}
	so, ok := v.lookup("Service", o.Namespace, name)
	if !ok {
		v.failf(o, "backend Service %q is not rendered", name)
		return
	}
	for _, p := range so.Obj.(*corev1.Service).Spec.Ports {
		if (b.Service.Port.Name != "" && p.Name == b.Service.Port.Name) ||
			(b.Service.Port.Name == "" && p.Port == b.Service.Port.Number) {
			return
		}
	}
	v.failf(o, "backend port %+v is not a port of Service %s", b.Service.Port, name)
}

func ingressBackends(ing *networkingv1.Ingress) []networkingv1.IngressBackend {
	var out []networkingv1.IngressBackend
	if ing.Spec.DefaultBackend != nil {
		out = append(out, *ing.Spec.DefaultBackend)
	}
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			out = append(out, p.Backend)
		}
	}
	return out
}

// ingressesTo returns the Ingresses with a backend on Service svc.
func (v *validator) ingressesTo(svc string) []*networkingv1.Ingress {
	var out []*networkingv1.Ingress
	for _, o := range v.objs {
		ing, ok := o.Obj.(*networkingv1.Ingress)
		if !ok {
			continue
		}
		for _, b := range ingressBackends(ing) {
			if b.Service != nil && b.Service.Name == svc {
				out = append(out, ing)
				break
			}
		}
	}
	return out
}

// publicHosts are the hosts of Ingress rules that route to a public
// Gatehouse Service: the hosts an issuer URL may name.
func (v *validator) publicHosts() map[string]bool {
	hosts := map[string]bool{}
	for _, svc := range v.p.Public {
		for _, ing := range v.ingressesTo(svc) {
			for _, r := range ing.Spec.Rules {
				if r.HTTP == nil {
					continue
				}
				for _, p := range r.HTTP.Paths {
					if p.Backend.Service != nil && p.Backend.Service.Name == svc {
						hosts[r.Host] = true
					}
				}
			}
		}
	}
	return hosts
}

// servicePort reports whether a rendered Service name exposes port.
func (v *validator) servicePort(ns, name string, port int32) (exists, hasPort bool) {
	o, ok := v.lookup("Service", ns, name)
	if !ok {
		return false, false
	}
	for _, p := range o.Obj.(*corev1.Service).Spec.Ports {
		if p.Port == port {
			return true, true
		}
	}
	return true, false
}
