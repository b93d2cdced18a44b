package sandbox

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
)

// displayTextBytes is the most of a markdown, latex or JSON display the
// structured result carries as text; the whole is its resource.
const displayTextBytes = 4096

// plainTextChars bounds a text/plain display's text in the result.
const plainTextChars = 4096

// buildDisplays turns a report's displays into the result's: each mime's
// data (data, by "<index>/<name>") checked against what its mime says, an
// image's size read from its header, a table's shape from its JSON. Data
// that is not what it claims is refused, never passed on.
func buildDisplays(runID string, rep *initproto.Report, data map[string][]byte) []contract.Display {
	if len(rep.Displays) == 0 {
		return nil
	}
	out := make([]contract.Display, 0, len(rep.Displays))
	for i, rd := range rep.Displays {
		d := contract.Display{Index: i, Source: rd.Source, After: contract.After{Stdout: rd.Stdout, Stderr: rd.Stderr}, Mimes: map[string]contract.DisplayMime{}}
		if rd.Cut != "" {
			d.AddCut(rd.Cut)
		}
		for _, rm := range rd.Mimes {
			m := contract.DisplayMime{Bytes: rm.Size}
			b, ok := data[strconv.Itoa(i)+"/"+rm.Name]
			if rm.Sent && ok && b != nil {
				if reason := checkDisplay(rm.Mime, b, &m); reason != "" {
					d.AddCut(reason)
				}
				if m.Data != nil {
					m.URI = contract.DisplayURI(runID, i, rm.Name)
				}
			}
			d.Mimes[rm.Mime] = m
		}
		out = append(out, d)
	}
	return out
}

// checkDisplay fills m from data of mime b: the data itself when it is
// what the mime says, with what the answer shows of it; a cut reason when
// it is refused (m.Data stays nil) or mended.
func checkDisplay(mime string, b []byte, m *contract.DisplayMime) string {
	switch mime {
	case "image/png":
		w, h, ok := pngSize(b)
		if !ok {
			return contract.DisplayCutInvalidData
		}
		m.Width, m.Height, m.Data = w, h, b
	case "image/jpeg":
		w, h, ok := jpegSize(b)
		if !ok {
			return contract.DisplayCutInvalidData
		}
		m.Width, m.Height, m.Data = w, h, b
	case "image/svg+xml":
		if !utf8.Valid(b) || !bytes.Contains(b, []byte("<svg")) {
			return contract.DisplayCutInvalidData
		}
		m.Width, m.Height = svgSize(b)
		m.Data = b
	case contract.TableMime:
		var t contract.Table
		if json.Unmarshal(b, &t) != nil || len(t.Shape) != 2 || t.Shape[0] < 0 || t.Shape[1] < 0 {
			return contract.DisplayCutInvalidData
		}
		rows, cols := t.Shape[0], t.Shape[1]
		m.Rows, m.Columns, m.Data = &rows, &cols, b
		m.Markdown = contract.TableMarkdown(&t, contract.TableTextRows, contract.TableTextColumns, contract.TableCellChars)
	case "application/json":
		if !json.Valid(b) {
			return contract.DisplayCutInvalidData
		}
		m.Data = b
		if len(b) <= displayTextBytes {
			m.Text = string(b)
		}
	default: // text/*
		reason := ""
		if !utf8.Valid(b) {
			b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
			reason = contract.DisplayCutInvalidUTF8
		}
		m.Data = b
		switch {
		case mime == "text/plain":
			m.Text = headChars(string(b), plainTextChars)
		case mime != "text/html" && len(b) <= displayTextBytes:
			m.Text = string(b)
		}
		return reason
	}
	return ""
}

func headChars(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// pngSize reads a PNG's size from its signature and IHDR chunk.
func pngSize(b []byte) (w, h int, ok bool) {
	if len(b) < 24 || !bytes.Equal(b[:8], []byte("\x89PNG\r\n\x1a\n")) || string(b[12:16]) != "IHDR" {
		return 0, 0, false
	}
	w, h = int(binary.BigEndian.Uint32(b[16:20])), int(binary.BigEndian.Uint32(b[20:24]))
	return w, h, w > 0 && h > 0
}

// jpegSize reads a JPEG's size from its first start-of-frame segment.
func jpegSize(b []byte) (w, h int, ok bool) {
	if len(b) < 4 || b[0] != 0xFF || b[1] != 0xD8 {
		return 0, 0, false
	}
	for i := 2; i+9 < len(b); {
		if b[i] != 0xFF {
			return 0, 0, false
		}
		marker := b[i+1]
		if marker == 0xFF {
			i++
			continue
		}
		n := int(binary.BigEndian.Uint16(b[i+2 : i+4]))
		// SOF0..SOF15 but DHT (C4), JPG (C8) and DAC (CC).
		if marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC {
			h, w = int(binary.BigEndian.Uint16(b[i+5:i+7])), int(binary.BigEndian.Uint16(b[i+7:i+9]))
			return w, h, w > 0 && h > 0
		}
		if n < 2 {
			return 0, 0, false
		}
		i += 2 + n
	}
	return 0, 0, false
}

var (
	svgTag   = regexp.MustCompile(`<svg\b[^>]*>`)
	svgWidth = regexp.MustCompile(`\swidth\s*=\s*["']\s*([0-9.]+)(px|pt)?\s*["']`)
	svgHigh  = regexp.MustCompile(`\sheight\s*=\s*["']\s*([0-9.]+)(px|pt)?\s*["']`)
)

// svgSize reads an SVG's width and height attributes when they are plain
// numbers (pixels or points); 0 when unknown.
func svgSize(b []byte) (w, h int) {
	tag := svgTag.Find(b[:min(len(b), 4096)])
	return svgLength(svgWidth.FindSubmatch(tag)), svgLength(svgHigh.FindSubmatch(tag))
}

func svgLength(m [][]byte) int {
	if m == nil {
		return 0
	}
	f, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil || f <= 0 || f > 1e6 {
		return 0
	}
	if string(m[2]) == "pt" {
		f = f * 4 / 3
	}
	return int(f + 0.5)
}
