// Package derived builds and describes the derived sandbox image of the
// manifest's packages (`runbox images build`): FROM the base sandbox image,
// one layer holding exactly the declared packages and what they need, from
// the sources this machine reaches (Debian's archive for Python's
// python3-* packages, resolved on the host against the base image's own
// dpkg status; the npm registry for JavaScript, with a generated
// package-lock whose integrity npm checks). The image is tagged by a hash
// of the base image's recipe and the package list, and labelled with every
// installed package's version and hash; nothing is built when that tag
// exists on the current base. Resolutions, with the .debs and the npm
// tarballs they name, are kept in the user's cache directory, so a rebuild of the same list on the same base (an engine
// whose images were wiped) needs no network and gives the same files.
//
// spec.go is the tag, the plan and the labels; debian.go the Python side
// (apt-get and dpkg-deb on the host), npm.go the JavaScript side (npm on
// the host); build.go the build itself over the Engine API. The pure parts
// (tags, labels, apt's plan, dpkg status, npm's lock, the build context)
// are unit-tested. It knows nothing of MCP or of running boxes.
package derived
