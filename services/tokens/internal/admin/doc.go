// Package admin serves the instance-wide AdminService
// (proto/gatehouse/admin/v1): rotating and listing the token signing keys.
// One handler speaks Connect, gRPC and gRPC-web (connect-go) and REST JSON
// below /admin/v1 (vanguard transcoding of the google.api.http
// annotations). Every call needs "Authorization: Bearer <token>" of an
// IAM_OWNER; the check is delegated to an Authorizer the service wires in.
//
// Errors are connect errors carrying a gatehouse.management.v1.ErrorDetail
// {id, message}, so REST clients get google.rpc.Status JSON with the HTTP
// status of the code: 400 InvalidArgument (unsupported algorithm, malformed
// JSON body — vanguard's default would be 500), 401 Unauthenticated,
// 403 PermissionDenied, 409 Aborted (a concurrent rotation won; retry).
// Unexpected errors are logged and become Internal without detail.
//
// It depends on the keys package's types and on the generated code in
// pkg/gen/gatehouse/admin/v1.
package admin
