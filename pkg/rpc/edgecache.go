package rpc

import "time"

// EdgeCacheMaxAge is the longest edge keeps a service's public, cacheable
// response (discovery, the key set) before asking the service again. A
// key set can therefore reach a client up to this much later than the
// service publishes it, which tokens' key pre-publication allows for.
const EdgeCacheMaxAge = time.Second
