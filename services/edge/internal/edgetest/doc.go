// Package edgetest holds test helpers for edge's packages: real HTTP servers
// speaking HTTP/1.1 and h2c (HTTP/2 cleartext, prior knowledge) on 127.0.0.1,
// matching clients, and a backend that records what it received. Only tests
// import it.
package edgetest
