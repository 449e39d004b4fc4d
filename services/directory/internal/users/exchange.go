package users

import (
	"context"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// EventTokenExchanged records a token exchange (RFC 8693) in the audit
// trail. Each is an aggregate of its own (AggregateTokenExchange), owned
// by the subject's organization: exchanges never contend for the user's
// version, and change no projection.
const (
	EventTokenExchanged    = "user.token.exchanged"
	AggregateTokenExchange = "token_exchange"
)

// TokenExchanged is the event's payload: who got what in whose name.
type TokenExchanged struct {
	SubjectUserID      string   `json:"subjectUserId"`
	ClientID           string   `json:"clientId"`
	CallerUserID       string   `json:"callerUserId,omitempty"`
	ActorUserID        string   `json:"actorUserId,omitempty"`
	Impersonation      bool     `json:"impersonation,omitempty"`
	Audience           []string `json:"audience,omitempty"`
	Scopes             []string `json:"scopes,omitempty"`
	SubjectTokenType   string   `json:"subjectTokenType"`
	RequestedTokenType string   `json:"requestedTokenType"`
}

func registerExchange(es *eventstore.Store) {
	es.Register(EventTokenExchanged, func(context.Context, db.Querier, eventstore.Event) error { return nil })
}

// RecordTokenExchange appends the event; editor is the caller (its client
// id, or its user id for a machine user).
func (c *Commands) RecordTokenExchange(ctx context.Context, editor, orgID string, p TokenExchanged) error {
	_, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: AggregateTokenExchange, ID: secrets.NewID(), ResourceOwner: orgID},
		Events:    []eventstore.Pending{{Type: EventTokenExchanged, Payload: p}},
	})
	return err
}
