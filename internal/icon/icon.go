// Package icon draws runbox's icon: the server's and its tools' MCP icons
// and the MCP bundle's, at any size, from code, so that no binary asset is
// kept in the repository. It knows nothing of MCP.
package icon

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"math"
)

var (
	background = color.RGBA{0x1f, 0x29, 0x37, 0xff} // slate
	accent     = color.RGBA{0x14, 0xb8, 0xa6, 0xff} // teal
)

// PNG is the icon, size × size pixels: a box (a sandbox) on a rounded
// square, with a prompt's ">_" inside.
func PNG(size int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, size, size))
	s := float64(size)
	radius := s * 0.2
	for y := range size {
		for x := range size {
			fx, fy := float64(x)+0.5, float64(y)+0.5
			if !inRounded(fx, fy, 0, 0, s, s, radius) {
				continue
			}
			c := background
			// The box: a square outline.
			if inRounded(fx, fy, s*0.2, s*0.2, s*0.8, s*0.8, s*0.06) && !inRounded(fx, fy, s*0.27, s*0.27, s*0.73, s*0.73, s*0.03) {
				c = accent
			}
			// The prompt's ">": two strokes meeting at the middle.
			if onSegment(fx, fy, s*0.36, s*0.4, s*0.48, s*0.5, s*0.035) || onSegment(fx, fy, s*0.48, s*0.5, s*0.36, s*0.6, s*0.035) {
				c = accent
			}
			// The cursor "_".
			if fx > s*0.52 && fx < s*0.64 && fy > s*0.57 && fy < s*0.62 {
				c = accent
			}
			img.SetRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}

// DataURI is the icon as a data: URI, for MCP's icons.
func DataURI(size int) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(PNG(size))
}

func inRounded(x, y, x0, y0, x1, y1, r float64) bool {
	if x < x0 || x > x1 || y < y0 || y > y1 {
		return false
	}
	cx := math.Max(x0+r, math.Min(x, x1-r))
	cy := math.Max(y0+r, math.Min(y, y1-r))
	return math.Hypot(x-cx, y-cy) <= r
}

func onSegment(x, y, x0, y0, x1, y1, w float64) bool {
	dx, dy := x1-x0, y1-y0
	t := math.Max(0, math.Min(1, ((x-x0)*dx+(y-y0)*dy)/(dx*dx+dy*dy)))
	return math.Hypot(x-(x0+t*dx), y-(y0+t*dy)) <= w
}
