// Package skaffold parses the parts of skaffold.yaml that Gatehouse relies
// on (skaffold itself cannot be built here) and checks them against the
// repository and the rendered manifests: one artifact per image the
// manifests run, Dockerfiles and kustomize paths that exist, port
// forwards to rendered Service ports.
package skaffold
