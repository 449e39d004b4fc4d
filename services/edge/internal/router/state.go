package router

import (
	"time"

	"github.com/gin-gonic/gin"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/reqinfo"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// state is edge's state for one request: allocated once, by identify, and
// stored in the request's context under stateKey; every later step reaches
// it through stateOf. What services and the proxy need of it (request id,
// client address, the form of edge's errors) is info, which the request's
// context carries too (reqinfo).
type state struct {
	start time.Time
	path  string // captured first: an in-process handler (vanguard) may rewrite it
	info  reqinfo.Info
	// route is the table route gin matched; nil for a path no route
	// matches.
	route *routeSpec
	// service is the route's service once the path is known canonical,
	// for the access log.
	service routes.Service
	// panicked: the request ended in a panic (the access log says so).
	panicked bool
	hw       headerWriter
	limited  limitWriter
	body     limitedBody
}

// stateKey is the context key of the request's state. The request context
// holds it rather than gin's key map (gin.Context.Set), which would cost
// each request a map of its own: two more allocations, 336 bytes; the
// context costs one value of 48 bytes, and identify derives the request's
// context anyway.
type stateKey struct{}

// stateOf returns the request's state. Every handler of the engine runs
// after identify, which sets it.
func stateOf(c *gin.Context) *state {
	return c.Request.Context().Value(stateKey{}).(*state)
}
