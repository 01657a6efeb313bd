package policy

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
)

// numerical ranks tags by their value as floating-point numbers.
type numerical struct {
	// sign is 1 for ascending order, -1 for descending.
	sign int
}

// newNumerical returns the numerical policy for order.
func newNumerical(order string) (*numerical, error) {
	sign, err := parseOrder("numerical", order)
	if err != nil {
		return nil, err
	}
	return &numerical{sign: sign}, nil
}

// parseNumber reads tag as strconv.ParseFloat does, as Flux does. NaN is
// refused because it has no place in an order.
func parseNumber(tag string) (float64, error) {
	f, err := strconv.ParseFloat(tag, 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("%w: %q is not a number", ErrInvalidTag, tag)
	}
	return f, nil
}

// Latest returns the tag with the highest value for "asc", the lowest for
// "desc". As in Flux, a single tag that is not a number fails the whole
// selection (use a filter to leave such tags out), and of tags with equal
// values the last listed wins.
func (p *numerical) Latest(versions []string) (string, error) {
	if len(versions) == 0 {
		return "", fmt.Errorf("%w: the tag list is empty", ErrNoMatch)
	}
	latest := ""
	var latestValue float64
	for i, tag := range versions {
		v, err := parseNumber(tag)
		if err != nil {
			return "", err
		}
		if i == 0 || p.sign*cmp.Compare(v, latestValue) >= 0 {
			latest, latestValue = tag, v
		}
	}
	return latest, nil
}

// Compare orders a and b by value in the policy's order.
func (p *numerical) Compare(a, b string) (int, error) {
	va, err := parseNumber(a)
	if err != nil {
		return 0, err
	}
	vb, err := parseNumber(b)
	if err != nil {
		return 0, err
	}
	return p.sign * cmp.Compare(va, vb), nil
}
