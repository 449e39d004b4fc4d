package admin

import (
	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/restapi"
)

// newError returns a connect error with code carrying an ErrorDetail that
// names the failed rule (the management API's error shape).
func newError(code connect.Code, id, msg string) *connect.Error {
	return restapi.Error(code, id, "%s", msg)
}
