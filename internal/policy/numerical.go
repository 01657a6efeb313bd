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

// maxExactDigits is the most decimal digits whose every value float64
// holds exactly (10^15 < 2^53).
const maxExactDigits = 15

// parseNumber reads tag as strconv.ParseFloat does, as Flux does. NaN is
// refused because it has no place in an order. Tags of digits alone, the
// build numbers and timestamps CI pipelines tag with, are read by a loop
// of their own, to the same value (exact below 10^15) in about a quarter
// of the time; BenchmarkSelectLatest10000/numerical measures it.
func parseNumber(tag string) (float64, error) {
	if n := len(tag); n > 0 && n <= maxExactDigits {
		var v uint64
		digits := true
		for i := 0; i < n && digits; i++ {
			c := tag[i]
			digits = c >= '0' && c <= '9'
			v = v*10 + uint64(c-'0')
		}
		if digits {
			return float64(v), nil
		}
	}
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
