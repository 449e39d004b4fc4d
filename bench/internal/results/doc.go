// Package results is the machine-readable form of a `make bench` run: one
// JSON document (by default bench/results/latest.json) with the run's
// commit, date, machine and sizes, the in-process floor costs, and one
// record per scenario and mode with throughput, latency, server CPU per
// request summed over every server process (and by process) and memory.
// It writes the document and says which scenarios a run failed to cover.
// It depends only on the standard library.
package results
