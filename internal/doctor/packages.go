package doctor

import (
	"context"
	"fmt"

	"github.com/runbox-mcp/runbox/images/derived"
	"github.com/runbox-mcp/runbox/sandbox/docker"
)

// Derived is a derived image of the manifest's packages, as the report
// shows it: what it holds (versions and hashes) and whether it is current.
type Derived struct {
	derived.Image
	ID string `json:"id,omitempty"`
	// Current says the image exists and was built on the base image the
	// engine has now.
	Current  bool                `json:"current"`
	Packages []derived.Installed `json:"packages,omitempty"`
}

const buildFix = "Run `runbox images build` (`make setup` runs it for the manifest it uses)."

// derivedCheck checks one derived image against the manifest and the
// base image on the engine.
func derivedCheck(ctx context.Context, d *docker.Docker, im derived.Image) (Check, Derived) {
	c := Check{Name: "packages"}
	rep := Derived{Image: im}
	img, err := d.Image(ctx, im.Tag)
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("the derived image of the manifest's packages for %v is not built: %v", im.Languages, err), buildFix
		return c, rep
	}
	rep.ID = img.ID
	pkgs, err := derived.Packages(img.Labels)
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, err.Error(), buildFix+" with --force"
		return c, rep
	}
	rep.Packages = pkgs
	c.Detail = fmt.Sprintf("%s %s: %s", im.Tag, short(img.ID), derived.Summary(pkgs))
	base, err := d.Image(ctx, im.Base)
	switch {
	case err != nil:
		c.Status, c.Fix = Warn, "Run `runbox setup`, then `runbox images build`."
		c.Detail += fmt.Sprintf("; its base %s: %v", im.Base, err)
	case base.ID != img.Labels[derived.LabelBase]:
		c.Status, c.Fix = Warn, buildFix
		c.Detail += fmt.Sprintf("; built on %s, but %s is now %s", short(img.Labels[derived.LabelBase]), im.Base, short(base.ID))
	default:
		c.Status, rep.Current = OK, true
		c.Detail += " (current for the manifest)"
	}
	return c, rep
}
