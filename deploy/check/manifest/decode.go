package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Object is one decoded manifest: its kind and name, and the typed value
// (*appsv1.Deployment, *corev1.Service, ...).
type Object struct {
	Kind      string
	Namespace string
	Name      string
	Obj       runtime.Object
}

func (o Object) String() string {
	if o.Namespace != "" {
		return o.Kind + " " + o.Namespace + "/" + o.Name
	}
	return o.Kind + " " + o.Name
}

// decoder accepts only the API groups Gatehouse deploys with, so an
// unexpected kind (or a misspelt apiVersion) is an error rather than
// something waved through untyped.
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, networkingv1.AddToScheme, policyv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // static registration; cannot fail at run time
		}
	}
	// EnableStrict: unknown and duplicate fields are errors.
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}()

// Decode splits a YAML stream into documents and strictly decodes each into
// its typed struct. Every problem is reported, one per line.
func Decode(stream []byte) ([]Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []Object
	var errs []error
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read YAML document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d (%s): %w", i, describe(doc), err))
			continue
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d (%s): %w", i, gvk.Kind, err))
			continue
		}
		if m.GetName() == "" {
			errs = append(errs, fmt.Errorf("document %d (%s): metadata.name is empty", i, gvk.Kind))
			continue
		}
		objs = append(objs, Object{Kind: gvk.Kind, Namespace: m.GetNamespace(), Name: m.GetName(), Obj: obj})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return objs, nil
}

// stripComments drops whole-line comments so a document that holds only
// comments counts as empty.
func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out.Write(line)
		}
	}
	return out.Bytes()
}

// describe names a document that failed to decode, best effort.
func describe(doc []byte) string {
	var tm struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := utilyaml.Unmarshal(doc, &tm); err != nil || tm.Kind == "" {
		return "unidentified"
	}
	return tm.Kind + " " + tm.Metadata.Name
}
