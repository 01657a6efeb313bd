package policy

import (
	"fmt"
	"strings"
)

// parseOrder reads the order of an alphabetical or numerical policy: "asc"
// (the default when empty) selects the last value in ascending order, "desc"
// the first. Like Flux, the case of the value does not matter. It returns 1
// for ascending and -1 for descending, the factor that turns an ascending
// comparison into the policy's ranking.
func parseOrder(kind, order string) (int, error) {
	switch strings.ToLower(order) {
	case "", "asc":
		return 1, nil
	case "desc":
		return -1, nil
	default:
		return 0, fmt.Errorf("%w: %s order %q, must be one of: asc, desc", ErrInvalidPolicy, kind, order)
	}
}
