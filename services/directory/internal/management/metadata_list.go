package management

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
)

// metadataDefaultLimit is the page size of a ListQuery whose limit is 0;
// the maximums (limit 1000, 20 queries, keys of 200 characters) are
// protovalidate rules of ListQuery and ListUserMetadataRequest.
const metadataDefaultLimit = 100

// ListUserMetadata returns one page of a user's entries matching every key
// query, ordered by key (descending unless query.asc). The list details
// are the user's: every metadata change is an event of the user, so the
// user's last event (sequence, change date) is the last one reduced into
// what was listed, removals included.
func (s *Server) ListUserMetadata(ctx context.Context, req *managementv1.ListUserMetadataRequest) (*managementv1.ListUserMetadataResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("id", "id", m.GetId(), 1))
	limit := int(m.GetQuery().GetLimit())
	if limit == 0 {
		limit = metadataDefaultLimit
	}
	f.Check(lim.Max("query.limit", "query.limit"))
	f.Check(lim.Count("queries", "queries"))
	keyQueries := make([]metadata.KeyQuery, 0, len(m.GetQueries()))
	for i, q := range m.GetQueries() {
		field := fmt.Sprintf("queries[%d]", i)
		kq := q.GetKeyQuery()
		if kq == nil {
			f.Add(field, "must set key_query")
			continue
		}
		f.Check(lim.Length(field+".key_query.key", field+".key_query.key", kq.GetKey(), 0))
		method := textquery.Method(kq.GetMethod())
		if !method.Valid() {
			f.Add(field+".key_query.method", "is not a TextQueryMethod")
		}
		keyQueries = append(keyQueries, metadata.KeyQuery{Text: kq.GetKey(), Method: method})
	}
	lim.Rest(&f)
	if err := f.Err("METADATA-invalid-query"); err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "id", m.GetId())
	if err != nil {
		return nil, err
	}
	rows, total, err := s.metadataQueries().List(ctx, u.ID, metadata.ListOptions{
		Queries: keyQueries, Asc: m.GetQuery().GetAsc(), Offset: m.GetQuery().GetOffset(), Limit: limit,
	})
	if err != nil {
		return nil, err
	}
	res := &managementv1.ListUserMetadataResponse{Details: &managementv1.ListDetails{
		TotalResult:       total,
		ProcessedSequence: u.Sequence,
		ViewTimestamp:     timestamppb.New(u.ChangeDate),
	}}
	for i := range rows {
		res.Result = append(res.Result, metadataToProto(&rows[i]))
	}
	return res, nil
}
