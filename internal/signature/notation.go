package signature

import "fmt"

// compileNotation is not implemented yet.
func compileNotation(Spec) (Policy, error) {
	return nil, fmt.Errorf("%w: provider notation is not supported yet", ErrInvalidSpec)
}
