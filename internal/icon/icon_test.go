package icon

import (
	"bytes"
	"image/png"
	"strings"
	"testing"
)

func TestPNG(t *testing.T) {
	for _, size := range []int{16, 48, 512} {
		img, err := png.Decode(bytes.NewReader(PNG(size)))
		if err != nil || img.Bounds().Dx() != size || img.Bounds().Dy() != size {
			t.Fatalf("%d: %v %v", size, err, img.Bounds())
		}
		// Transparent corners, the accent in the box's edge.
		if _, _, _, a := img.At(0, 0).RGBA(); a != 0 {
			t.Errorf("%d: the corner is not transparent", size)
		}
		if r, g, b, _ := img.At(size/2, size*23/100).RGBA(); r>>8 != 0x14 || g>>8 != 0xb8 || b>>8 != 0xa6 {
			t.Errorf("%d: the box's top edge is %x %x %x", size, r>>8, g>>8, b>>8)
		}
	}
	if !bytes.Equal(PNG(64), PNG(64)) || !strings.HasPrefix(DataURI(16), "data:image/png;base64,iVBOR") {
		t.Fatal("not the same icon twice, or not a PNG data URI")
	}
}
