package manifest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a count of bytes that reads as a number or as a string with
// a binary unit ("64MiB", "1.5GiB", "512KiB", "100B").
type ByteSize int64

// Byte units.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
)

var units = []struct {
	suffix string
	size   ByteSize
}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}, {"B", 1}}

// String renders the largest unit that divides the size exactly.
func (b ByteSize) String() string {
	for _, u := range units {
		if u.size > 1 && b != 0 && b%u.size == 0 {
			return fmt.Sprintf("%d%s", b/u.size, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", int64(b))
}

// ParseByteSize reads "64MiB", "2GiB", "1024" (bytes).
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || f < 0 {
				return 0, fmt.Errorf("bad size %q: want a number with B, KiB, MiB or GiB", s)
			}
			return ByteSize(f * float64(u.size)), nil
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q: want a number with B, KiB, MiB or GiB", s)
	}
	return ByteSize(n), nil
}

// UnmarshalJSON accepts a number of bytes or a size string.
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		v, err := ParseByteSize(s)
		*b = v
		return err
	}
	var n int64
	if err := json.Unmarshal(data, &n); err != nil || n < 0 {
		return fmt.Errorf("bad size %s: want a number of bytes or a string like \"64MiB\"", data)
	}
	*b = ByteSize(n)
	return nil
}

// MarshalJSON writes the size as the string a person would (e.g. "64MiB"),
// which UnmarshalJSON reads back.
func (b ByteSize) MarshalJSON() ([]byte, error) {
	return json.Marshal(b.String())
}
