// Package routes owns edge's public route table: which path prefix belongs to
// which backend service (authn, tokens, directory), what kind of endpoint it
// is, which decides CORS and body limits in the router, and its rate-limit
// class, which decides the budget a request is charged to. It depends on
// nothing else in edge. Paths not in the table, including every internal
// Connect service (gatehouse.directory.v1.DirectoryService,
// gatehouse.tokens.v1.TokenService), are never routed.
package routes
