package manifest

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1
`

func TestDecodeTyped(t *testing.T) {
	stream := "# leading comment\n---\n" + deployment + "---\n# only a comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: web\n"
	objs, err := Decode([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("got %d objects; want 2", len(objs))
	}
	d, ok := objs[0].Obj.(*appsv1.Deployment)
	if !ok || objs[0].Kind != "Deployment" || objs[0].Name != "web" {
		t.Fatalf("got %v (%T); want Deployment web", objs[0], objs[0].Obj)
	}
	if d.Spec.Template.Spec.Containers[0].Image != "nginx:1" {
		t.Errorf("got image %q; want nginx:1", d.Spec.Template.Spec.Containers[0].Image)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown field", strings.Replace(deployment, "image: nginx:1", "image: nginx:1\n          livenessProbes: {}", 1), `unknown field "spec.template.spec.containers[0].livenessProbes"`},
		{"misplaced field", strings.Replace(deployment, "  replicas: 1", "  replicas: 1\n  ports: []", 1), `unknown field "spec.ports"`},
		{"duplicate field", strings.Replace(deployment, "  replicas: 1", "  replicas: 1\n  replicas: 2", 1), `"replicas" already set`},
		{"wrong type", strings.Replace(deployment, "replicas: 1", "replicas: two", 1), "cannot unmarshal"},
		{"misspelt kind", strings.Replace(deployment, "kind: Deployment", "kind: Deploymnet", 1), `no kind "Deploymnet" is registered`},
		{"wrong apiVersion", strings.Replace(deployment, "apps/v1", "apps/v1beta1", 1), `no kind "Deployment" is registered for version "apps/v1beta1"`},
		{"unsupported kind", "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n", `no kind "Job" is registered`},
		{"no kind", "apiVersion: v1\nmetadata:\n  name: x\n", "Object 'Kind' is missing"},
		{"no name", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {}\n", "metadata.name is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil {
				t.Fatalf("got no error; want one containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %q; want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestDecodeReportsEveryDocument(t *testing.T) {
	bad := strings.Replace(deployment, "replicas: 1", "replica: 1", 1)
	_, err := Decode([]byte(bad + "---\n" + strings.Replace(bad, "name: web\nspec", "name: api\nspec", 1)))
	if err == nil {
		t.Fatal("got no error; want two")
	}
	for _, want := range []string{"document 0 (Deployment web)", "document 1 (Deployment api)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q; want it to mention %q", err, want)
		}
	}
}
