// Package manifest decodes rendered Kubernetes manifests strictly into the
// typed k8s.io/api structs and checks them against Gatehouse's deployment
// policy: every object well-formed, every reference resolvable, every
// container probed, bounded and unprivileged, every pod isolated by
// NetworkPolicies that admit exactly its callers, and the Gatehouse
// configuration each process receives consistent with the objects around
// it (service URLs name rendered Services, the issuer is the Ingress host).
//
// It knows nothing about kustomize or files; callers hand it YAML.
package manifest
