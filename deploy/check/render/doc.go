// Package render builds a kustomization directory in-process with the
// kustomize API (sigs.k8s.io/kustomize/api/krusty), producing the same
// YAML stream as `kustomize build DIR` without the kustomize binary.
package render
