// Package apierr builds the management API's errors: a connect error with a
// code that maps to the documented HTTP status and one ErrorDetail naming
// the failed rule, so REST clients get google.rpc.Status JSON
// {code, message, details[{@type, id, message}]} and gRPC clients the same
// status in trailers. It also translates storage errors.
package apierr

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/restapi"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// New returns a connect error with code, carrying an ErrorDetail.
func New(code connect.Code, id, format string, args ...any) *connect.Error {
	return restapi.Error(code, id, format, args...)
}

// InvalidArgument (HTTP 400): a field outside its documented rules.
func InvalidArgument(id, format string, args ...any) *connect.Error {
	return New(connect.CodeInvalidArgument, id, format, args...)
}

// NotFound (HTTP 404): no such object in the organization.
func NotFound(id, format string, args ...any) *connect.Error {
	return New(connect.CodeNotFound, id, format, args...)
}

// AlreadyExists (HTTP 409): a uniqueness conflict.
func AlreadyExists(id, format string, args ...any) *connect.Error {
	return New(connect.CodeAlreadyExists, id, format, args...)
}

// Precondition (HTTP 409): the object's state does not allow the change, or
// nothing would change. Aborted, not FailedPrecondition, because Connect
// maps FailedPrecondition to 400.
func Precondition(id, format string, args ...any) *connect.Error {
	return New(connect.CodeAborted, id, format, args...)
}

// PermissionDenied (HTTP 403).
func PermissionDenied(id, format string, args ...any) *connect.Error {
	return New(connect.CodePermissionDenied, id, format, args...)
}

// Unauthenticated (HTTP 401).
func Unauthenticated(id, format string, args ...any) *connect.Error {
	return New(connect.CodeUnauthenticated, id, format, args...)
}

// FromStore translates an error of the event store or a projection query:
// a lost concurrent write is Aborted (retry), a uniqueness conflict is
// AlreadyExists, a missing row NotFound; anything else is returned as is
// and becomes Internal at the API boundary.
func FromStore(err error, what string) error {
	var ce *connect.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return err
	case errors.Is(err, eventstore.ErrConcurrent):
		return New(connect.CodeAborted, "COMMAND-concurrent", "%s was changed concurrently; retry", what)
	case errors.Is(err, eventstore.ErrUnique):
		return AlreadyExists("COMMAND-unique", "%s already exists", what)
	case errors.Is(err, db.ErrNotFound):
		return NotFound("QUERY-not-found", "%s not found", what)
	}
	return err
}
