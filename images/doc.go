// Package images holds the sandbox image's recipe (build.sh and sandbox/),
// so that a built runbox can tell whether an engine's image is current.
//
// It must not know the engine: building and checking images is the
// set-up's and the drivers' work.
package images
