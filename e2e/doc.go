// Package e2e holds the end-to-end tests: the built runbox binary, driven
// over MCP by real clients (mcp-go's, and the reference TypeScript SDK's),
// running code in real containers on a real Docker engine.
//
// The run_code contract is one table (contract_test.go) that TestContract
// runs on every backend: Docker, gVisor, Podman and Kubernetes, each case
// both as a one-off run and as a session's cell, which must answer the
// same (contract_cells_test.go). The other tests are of one backend's own
// behaviour, or of the server itself.
//
// They run with `make e2e` (build tag e2e). In CI a missing engine or
// backend fails them loudly; on a developer machine without one they skip,
// saying why.
//
// RUNBOX_E2E_IMAGE runs the tests of the image's network clients and
// package installs (network_packages_test.go) on another image than
// runbox/sandbox:bookworm, e.g. a branch's recipe built under its own tag
// (RUNBOX_IMAGE=runbox/sandbox:mine bash images/build.sh), so the shared
// image is never replaced while other suites use it.
package e2e
