package management

import (
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
)

// metadataQueries reads user metadata.
func (s *Server) metadataQueries() *metadata.Queries {
	return &metadata.Queries{DB: s.ES.DB()}
}

// metadataCommands changes user metadata.
func (s *Server) metadataCommands() *metadata.Commands {
	return &metadata.Commands{ES: s.ES, Q: s.metadataQueries()}
}

// metadataToProto renders an entry with the details of its own events.
func metadataToProto(m *metadata.Metadata) *managementv1.Metadata {
	return &managementv1.Metadata{
		Details: readDetails(m.CreationDate, m.ChangeDate, m.Sequence, m.OrgID),
		Key:     m.Key,
		Value:   m.Value,
	}
}
