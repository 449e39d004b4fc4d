// Package projections registers every reducer of the directory with an
// event store, so the service and the tests build identical stores.
package projections

import (
	"github.com/gatehouse-id/gatehouse/services/directory/internal/bootstrap"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/idps"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// RegisterAll adds every reducer to es.
func RegisterAll(es *eventstore.Store) {
	orgs.Register(es)
	users.Register(es)
	metadata.Register(es)
	idps.Register(es)
	projects.Register(es)
	bootstrap.Register(es)
}
