// Prints the published image a build pins, for TestPublishedByLinker.
package main

import (
	"fmt"

	"github.com/runbox-mcp/runbox/images"
)

func main() { fmt.Print(images.Published()) }
