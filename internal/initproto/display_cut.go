package initproto

// Why a display, or a mime of it, was left out: the box's reasons (the
// server adds its own when it bounds the answer).
const (
	// DisplayCutCount: past MaxDisplays or the artifact count cap.
	DisplayCutCount = "count"
	// DisplayCutBytes: its data was past what was left of the artifact
	// byte budget; only its size is known.
	DisplayCutBytes = "bytes"
	// DisplayCutInvalid: the display's description was malformed, named a
	// mime outside DisplayNames, or a file that is not a regular file.
	DisplayCutInvalid = "invalid"
)
