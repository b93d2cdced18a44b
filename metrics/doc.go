// Package metrics exposes runbox's Prometheus metrics: runs by language,
// status and error kind, run latency, queue depth, pool sizes and boxes
// alive.
//
// It must not know the engine or MCP: it reads the runner's Stats and the
// contract's results.
package metrics
