package drop

import "os"

// Remove drops an error, in plain sight or not.
func Remove(p string) {
	os.Remove(p) // want `unchecked error \(errcheck\)`
	os.Remove(p) //nolint:errcheck // the test says why
}
