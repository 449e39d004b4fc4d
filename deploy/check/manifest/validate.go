package manifest

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Error lists every policy violation found in one validation.
type Error struct {
	Problems []string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d manifest problem(s):\n  %s", len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// Validate checks decoded objects against the policy and returns an *Error
// listing every violation, or nil.
func Validate(objs []Object, p Policy) error {
	v := newValidator(objs, p)
	v.run()
	if len(v.problems) == 0 {
		return nil
	}
	sort.Strings(v.problems)
	return &Error{Problems: v.problems}
}

// Images returns the container images the objects run, sorted, each once.
func Images(objs []Object) []string {
	seen := map[string]bool{}
	for _, w := range workloads(objs) {
		for _, c := range allContainers(w.pod) {
			seen[c.Image] = true
		}
	}
	out := make([]string, 0, len(seen))
	for img := range seen {
		out = append(out, img)
	}
	sort.Strings(out)
	return out
}

// workload is a Deployment or StatefulSet, reduced to what the checks read.
type workload struct {
	Object
	selector *metav1.LabelSelector
	pod      *corev1.PodTemplateSpec
	// claims are the volumeClaimTemplates' names (StatefulSet), which
	// containers mount like volumes.
	claims []string
}

func workloads(objs []Object) []workload {
	var out []workload
	for _, o := range objs {
		switch w := o.Obj.(type) {
		case *appsv1.Deployment:
			out = append(out, workload{Object: o, selector: w.Spec.Selector, pod: &w.Spec.Template})
		case *appsv1.StatefulSet:
			wl := workload{Object: o, selector: w.Spec.Selector, pod: &w.Spec.Template}
			for _, c := range w.Spec.VolumeClaimTemplates {
				wl.claims = append(wl.claims, c.Name)
			}
			out = append(out, wl)
		}
	}
	return out
}

func allContainers(pod *corev1.PodTemplateSpec) []corev1.Container {
	return append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
}

type validator struct {
	p         Policy
	objs      []Object
	byKey     map[string]Object
	workloads []workload
	problems  []string
	// procs collects each Gatehouse container's resolved environment for
	// the cross-process checks.
	procs []*process
}

func newValidator(objs []Object, p Policy) *validator {
	v := &validator{p: p, objs: objs, byKey: map[string]Object{}, workloads: workloads(objs)}
	for _, o := range objs {
		k := key(o.Kind, o.Namespace, o.Name)
		if _, dup := v.byKey[k]; dup {
			v.failf(o, "defined twice")
		}
		v.byKey[k] = o
	}
	return v
}

func key(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

func (v *validator) lookup(kind, ns, name string) (Object, bool) {
	o, ok := v.byKey[key(kind, ns, name)]
	return o, ok
}

func (v *validator) failf(o Object, format string, args ...any) {
	v.problems = append(v.problems, o.String()+": "+fmt.Sprintf(format, args...))
}

func (v *validator) fail(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

func (v *validator) run() {
	v.checkRequired()
	for _, w := range v.workloads {
		v.checkWorkload(w)
	}
	for _, o := range v.objs {
		switch x := o.Obj.(type) {
		case *corev1.Service:
			v.checkService(o, x)
		case *networkingv1.Ingress:
			v.checkIngress(o, x)
		case *networkingv1.NetworkPolicy:
			v.checkNetworkPolicy(o, x)
		case *policyv1.PodDisruptionBudget:
			if len(v.selected(o.Namespace, x.Spec.Selector)) == 0 {
				v.failf(o, "selector matches no workload")
			}
		case *appsv1.StatefulSet:
			if _, ok := v.lookup("Service", o.Namespace, x.Spec.ServiceName); !ok {
				v.failf(o, "serviceName %q is not a rendered Service", x.Spec.ServiceName)
			}
		}
	}
	v.checkNetworkIsolation()
	v.checkProcesses()
}

// checkRequired: the objects every Gatehouse service needs exist.
func (v *validator) checkRequired() {
	for _, svc := range v.p.Services {
		for _, kind := range []string{"ServiceAccount", "Deployment", "Service"} {
			if !v.anyNamed(kind, svc) {
				v.fail("missing %s %s", kind, svc)
			}
		}
	}
	for _, svc := range v.p.Public {
		if len(v.ingressesTo(svc)) == 0 {
			v.fail("no Ingress routes to Service %s", svc)
		}
	}
	for _, name := range v.p.Secrets {
		if v.generated("Secret", "", name) == nil {
			v.fail("missing Secret %s", name)
		}
	}
}

func (v *validator) anyNamed(kind, name string) bool {
	for _, o := range v.objs {
		if o.Kind == kind && o.Name == name {
			return true
		}
	}
	return false
}

// generated finds an object by its generator name: kustomize appends a
// hash suffix ("-" and 10 characters) to generated ConfigMaps and Secrets.
func (v *validator) generated(kind, ns, name string) *Object {
	for _, o := range v.objs {
		if o.Kind != kind || o.Namespace != ns {
			continue
		}
		if o.Name == name {
			return &o
		}
		if rest, ok := strings.CutPrefix(o.Name, name+"-"); ok && len(rest) == 10 && !strings.Contains(rest, "-") {
			return &o
		}
	}
	return nil
}

// selected returns the workloads whose pods a label selector matches.
func (v *validator) selected(ns string, sel *metav1.LabelSelector) []workload {
	if sel == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
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
