package cli

import "os"

// IsTerminal reports whether f looks like a terminal.
//
// It checks for a character device, the test the standard library allows
// without golang.org/x/term, which Flint does not depend on. /dev/null is a
// character device too, so `flint cli < /dev/null` prompts once and exits,
// and output sent to /dev/null is formatted; neither is seen by anyone.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
