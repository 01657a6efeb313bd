package policy

import (
	"fmt"
	"strings"
)

// alphabetical ranks tags by byte-wise string order.
type alphabetical struct {
	// sign is 1 for ascending order, -1 for descending.
	sign int
}

// newAlphabetical returns the alphabetical policy for order.
func newAlphabetical(order string) (*alphabetical, error) {
	sign, err := parseOrder("alphabetical", order)
	if err != nil {
		return nil, err
	}
	return &alphabetical{sign: sign}, nil
}

// Latest returns the last tag in the policy's order: the greatest string
// for "asc", the least for "desc".
func (p *alphabetical) Latest(versions []string) (string, error) {
	if len(versions) == 0 {
		return "", fmt.Errorf("%w: the tag list is empty", ErrNoMatch)
	}
	latest := versions[0]
	for _, tag := range versions[1:] {
		if p.rank(tag, latest) > 0 {
			latest = tag
		}
	}
	return latest, nil
}

// Compare orders a and b by the policy's order; any two strings can be
// ordered.
func (p *alphabetical) Compare(a, b string) (int, error) {
	return p.rank(a, b), nil
}

// rank compares a and b in the policy's order.
func (p *alphabetical) rank(a, b string) int {
	return p.sign * strings.Compare(a, b)
}
