package admin

import (
	"errors"

	"connectrpc.com/connect"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
)

// newError returns a connect error with code carrying an ErrorDetail that
// names the failed rule (the management API's error shape).
func newError(code connect.Code, id, msg string) *connect.Error {
	e := connect.NewError(code, errors.New(msg))
	if d, err := connect.NewErrorDetail(&managementv1.ErrorDetail{Id: id, Message: msg}); err == nil {
		e.AddDetail(d)
	}
	return e
}
