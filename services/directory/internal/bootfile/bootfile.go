// Package bootfile applies GATEHOUSE_BOOTSTRAP_FILE at first start: the
// documents of gatehouse apply, through the directory's own management
// API (in process, as bootstrap-admin, under the same authorization
// rules as a call with its token), so a cluster is provisioned from a
// ConfigMap with no file copied out of a pod.
package bootfile

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	"github.com/gatehouse-id/gatehouse/services/directory/apply"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// SecretsFileName is where client secrets of applications the file
// creates are written, in the data directory (0600).
const SecretsFileName = "bootstrap-secrets.yaml"

// handlerTransport serves requests with an in-process handler.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// Applier applies documents through the management API handler.
type Applier struct {
	Docs    []*apply.Doc
	API     http.Handler // the directory's public handler (interceptors included)
	DataDir string
	Logger  *slog.Logger
}

// Apply plans and applies the documents as userID.
func (a *Applier) Apply(ctx context.Context, userID string) error {
	client := managementv1connect.NewManagementServiceClient(&http.Client{Transport: handlerTransport{a.API}}, "http://directory.internal")
	ctx = authz.AsUser(ctx, userID)
	e := &apply.Engine{API: client}
	plan, err := e.Plan(ctx, a.Docs)
	if err != nil {
		return err
	}
	secrets, err := e.Apply(ctx, plan)
	if len(secrets) > 0 {
		path := filepath.Join(a.DataDir, SecretsFileName)
		if werr := writeSecrets(path, secrets); werr != nil {
			return fmt.Errorf("write the client secrets: %w (apply: %v)", werr, err)
		}
		a.Logger.Info("first start: wrote the client secrets of the bootstrap file's applications", "path", path, "count", len(secrets))
	}
	if err != nil {
		return err
	}
	create, update, unchanged := plan.Counts()
	a.Logger.Info("first start: applied GATEHOUSE_BOOTSTRAP_FILE", "created", create, "updated", update, "unchanged", unchanged)
	return nil
}

func writeSecrets(path string, secrets []apply.Secret) error {
	raw, err := yaml.Marshal(map[string]any{"secrets": secrets})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	// Appended: a start that failed half-way may have written some.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append([]byte("---\n"), raw...)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
