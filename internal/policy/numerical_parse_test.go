package policy

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestParseNumberIsParseFloat shows that the loop for tags of digits
// alone reads each to the value strconv.ParseFloat (Flux's reading)
// gives: leading zeros, the longest tags it takes, and those just past it,
// which ParseFloat reads.
func TestParseNumberIsParseFloat(t *testing.T) {
	tags := []string{"0", "7", "007", "10", "999999999999999", "1000000000000000", "9007199254740993",
		"123456789012345678901234567890", "1.5", "-3", "+3", "1e3", "0x10", "inf", "1_000", "", "12a", "٣"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		var b strings.Builder
		for range 1 + r.IntN(maxExactDigits+2) {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		tags = append(tags, b.String())
	}
	for _, tag := range tags {
		want, wantErr := strconv.ParseFloat(tag, 64)
		got, err := parseNumber(tag)
		if (err != nil) != (wantErr != nil) || (err == nil && got != want) {
			t.Errorf("parseNumber(%q) = %v, %v; strconv.ParseFloat gives %v, %v", tag, got, err, want, wantErr)
		}
	}
}
