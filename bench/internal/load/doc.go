// Package load drives a fixed number of HTTP requests at a fixed
// concurrency over keep-alive HTTP/1.1 and records each request's latency
// and outcome. Its client dials only loopback addresses, so a benchmark
// cannot send traffic off the machine. It depends only on the standard
// library.
package load
