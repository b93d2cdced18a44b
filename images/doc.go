// Package images holds the sandbox image's recipe (build.sh and sandbox/),
// so that a built runbox can tell whether an engine's image is current.
//
// It must not talk to the engine: building and checking images is the
// set-up's and the drivers' work (it only reads the message stream an
// engine's build or pull answers, for both builders).
package images
