// Package setup is `runbox setup`: it checks the engine, then makes the
// sandbox image available on it, by the first way that works:
//
//  1. it is already there, built from this binary's recipe (the
//     io.runbox.recipe label): nothing to do;
//  2. pull the published image this binary pins by digest, when the engine
//     reaches a registry (the engine checks the digest; runbox checks the
//     recipe label);
//  3. build it inside the engine from the embedded recipe
//     (images/sandbox/Dockerfile: debootstrap in a pinned Debian base), so
//     that no root, debootstrap or Linux is needed on this machine.
//
// The host build (images/build.sh: debootstrap on this machine, then
// import) is a fourth way, chosen explicitly; `make setup` uses it.
//
// The decisions are pure and tested with a fake Engine; engine.go speaks
// the Engine API. This package knows nothing of MCP or of running boxes.
package setup
