package launch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// StartEmbedded runs bin/edge alone: authn, tokens and directory
// in-process, SQLite files in a fresh data directory under o.WorkDir.
func StartEmbedded(ctx context.Context, o Options) (*Deployment, error) {
	addrs, err := freeAddrs(2) // the server, and its /metrics
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(o.WorkDir, "edge-data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	base := "http://" + addrs[0]
	env, err := commonEnv(o, base)
	if err != nil {
		return nil, err
	}
	env["GATEHOUSE_ADDR"] = addrs[0]
	env["GATEHOUSE_METRICS_ADDR"] = addrs[1]
	env["GATEHOUSE_DATA_DIR"] = dataDir
	profiling(env, "edge", addrs[1])
	edge, err := start(o, "edge", addrs[0], env)
	if err != nil {
		return nil, err
	}
	edge.metrics = "http://" + addrs[1]
	d := &Deployment{Base: base, KeyFile: filepath.Join(dataDir, "bootstrap-admin-key.json"), procs: []*child{edge}}
	if err := d.waitStarted(ctx, o); err != nil {
		return nil, err
	}
	return d, nil
}

// waitStarted waits for readiness and the bootstrap key file, stopping the
// deployment when it does not come up.
func (d *Deployment) waitStarted(ctx context.Context, o Options) error {
	wctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	err := waitReady(wctx, d.procs)
	if err == nil {
		err = waitFile(wctx, d.KeyFile)
	}
	if err != nil {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer scancel()
		_ = d.Stop(sctx)
		return err
	}
	return nil
}
