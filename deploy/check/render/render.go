package render

import (
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Build renders the kustomization in dir (a path on disk) the way the
// kustomize CLI does: file references stay inside the kustomization root,
// and resources come out in kustomize's legacy kind order (ConfigMaps and
// Secrets before the workloads that use them), which the API's defaults
// would not apply.
func Build(dir string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	k := krusty.MakeKustomizer(opts)
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: encode: %w", dir, err)
	}
	return out, nil
}
