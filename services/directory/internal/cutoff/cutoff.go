// Package cutoff delivers the user_token_cutoffs outbox to the tokens
// service. A deactivation, removal or admin password reset writes its
// cut-off in the event's transaction (users.CutAccess), so it is as
// durable as the change itself; Deliver then asks the tokens service to
// revoke the user's tokens issued up to then (RevokeUserTokens, idempotent)
// and deletes the row once it is recorded there. The management call that
// made the change delivers at once; Run retries what could not be
// delivered (the tokens service down), so a revocation is late at worst,
// never lost. Until it arrives, the user's tokens still fail wherever
// the user's state is checked (directory's GetClaims refuses inactive
// users, the management API refuses them).
package cutoff

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
)

// Revoker is the tokens service's RevokeUserTokens and RevokeGrantTokens.
type Revoker interface {
	RevokeUserTokens(context.Context, *tokensv1.RevokeUserTokensRequest) (*tokensv1.RevokeUserTokensResponse, error)
	RevokeGrantTokens(context.Context, *tokensv1.RevokeGrantTokensRequest) (*tokensv1.RevokeGrantTokensResponse, error)
	RevokeImpersonations(context.Context, *tokensv1.RevokeImpersonationsRequest) (*tokensv1.RevokeImpersonationsResponse, error)
}

// Outbox delivers cut-offs.
type Outbox struct {
	DB     *db.DB
	Tokens Revoker
	Logger *slog.Logger
}

// batch bounds the rows one Deliver reads.
const batch = 200

type row struct {
	UserID   string    `db:"user_id"`
	NotAfter time.Time `db:"not_after"`
}

// Deliver sends every pending cut-off (at most batch per call) and returns
// the first error; rows that failed stay for the next call.
func (o *Outbox) Deliver(ctx context.Context) error {
	var rows []row
	if err := o.DB.Select(ctx, &rows, `SELECT user_id, not_after FROM user_token_cutoffs ORDER BY user_id LIMIT ?`, batch); err != nil {
		return fmt.Errorf("cutoff: read outbox: %w", err)
	}
	for _, r := range rows {
		if _, err := o.Tokens.RevokeUserTokens(ctx, &tokensv1.RevokeUserTokensRequest{
			UserId: r.UserID, NotAfter: timestamppb.New(r.NotAfter),
		}); err != nil {
			return fmt.Errorf("cutoff: revoke tokens of user %s: %w", r.UserID, err)
		}
		// A later cut-off written meanwhile has another not_after and stays.
		if _, err := o.DB.Exec(ctx, `DELETE FROM user_token_cutoffs WHERE user_id = ? AND not_after = ?`, r.UserID, r.NotAfter); err != nil {
			return fmt.Errorf("cutoff: clear outbox row: %w", err)
		}
	}
	if err := o.deliverGrants(ctx); err != nil {
		return err
	}
	return o.deliverImpersonations(ctx)
}

type impersonationRow struct {
	OrgID    string    `db:"org_id"`
	NotAfter time.Time `db:"not_after"`
}

// deliverImpersonations sends the withdrawn impersonation rights: the
// tokens impersonations issued for the organization's users go.
func (o *Outbox) deliverImpersonations(ctx context.Context) error {
	var rows []impersonationRow
	if err := o.DB.Select(ctx, &rows, `SELECT org_id, not_after FROM impersonation_cutoffs ORDER BY org_id LIMIT ?`, batch); err != nil {
		return fmt.Errorf("cutoff: read impersonation outbox: %w", err)
	}
	for _, r := range rows {
		if _, err := o.Tokens.RevokeImpersonations(ctx, &tokensv1.RevokeImpersonationsRequest{
			OrgId: r.OrgID, NotAfter: timestamppb.New(r.NotAfter),
		}); err != nil {
			return fmt.Errorf("cutoff: revoke impersonations for organization %s: %w", r.OrgID, err)
		}
		if _, err := o.DB.Exec(ctx, `DELETE FROM impersonation_cutoffs WHERE org_id = ? AND not_after = ?`, r.OrgID, r.NotAfter); err != nil {
			return fmt.Errorf("cutoff: clear impersonation outbox row: %w", err)
		}
	}
	return nil
}

type grantRow struct {
	ProjectID string    `db:"project_id"`
	OrgID     string    `db:"org_id"`
	NotAfter  time.Time `db:"not_after"`
}

// deliverGrants sends the removed project grants: the project's clients
// (its apps now; an app removed since has no token left to cut) lose what
// they hold for the organization's users.
func (o *Outbox) deliverGrants(ctx context.Context) error {
	var rows []grantRow
	if err := o.DB.Select(ctx, &rows, `SELECT project_id, org_id, not_after FROM grant_cutoffs ORDER BY project_id, org_id LIMIT ?`, batch); err != nil {
		return fmt.Errorf("cutoff: read grant outbox: %w", err)
	}
	for _, r := range rows {
		var clients []string
		if err := o.DB.Select(ctx, &clients, `SELECT client_id FROM apps WHERE project_id = ? ORDER BY client_id`, r.ProjectID); err != nil {
			return fmt.Errorf("cutoff: clients of project %s: %w", r.ProjectID, err)
		}
		if len(clients) > 0 {
			if _, err := o.Tokens.RevokeGrantTokens(ctx, &tokensv1.RevokeGrantTokensRequest{
				ClientIds: clients, OrgId: r.OrgID, NotAfter: timestamppb.New(r.NotAfter),
			}); err != nil {
				return fmt.Errorf("cutoff: revoke tokens of project %s for organization %s: %w", r.ProjectID, r.OrgID, err)
			}
		}
		if _, err := o.DB.Exec(ctx, `DELETE FROM grant_cutoffs WHERE project_id = ? AND org_id = ? AND not_after = ?`,
			r.ProjectID, r.OrgID, r.NotAfter); err != nil {
			return fmt.Errorf("cutoff: clear grant outbox row: %w", err)
		}
	}
	return nil
}

// DeliverNow is Deliver for a management call that just wrote a cut-off:
// bounded in time, detached from the caller hanging up, and failures only
// logged (Run retries them).
func (o *Outbox) DeliverNow(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := o.Deliver(dctx); err != nil {
		o.Logger.WarnContext(ctx, "token revocation not delivered yet; retrying in the background", "err", err)
	}
}

// Run delivers every interval until ctx ends.
func (o *Outbox) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		err := o.Deliver(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			o.Logger.Warn("token revocations pending: the tokens service does not take them", "err", err)
			failing = true
		case err == nil && failing:
			o.Logger.Info("pending token revocations delivered")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
