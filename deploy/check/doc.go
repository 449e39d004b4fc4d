// Package check validates Gatehouse's deployment artifacts offline: it
// renders deploy/k8s (base and every overlay) with the kustomize API,
// strictly decodes and checks every object, and checks skaffold.yaml and
// deploy/Dockerfile against the manifests and the Go workspace.
//
// The package itself holds only the repository-level tests; the work is in
// render (kustomize), manifest (decoding and policy), skaffold and
// dockerfile. It is a module of its own, outside go.work, so the
// Kubernetes and kustomize dependencies never reach the services. Run it
// with
//
//	cd deploy/check && GOWORK=off go test -count=1 ./...
package check
