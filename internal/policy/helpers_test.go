package policy_test

import (
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
)

// semverChoice returns a policy choice with a semver range.
func semverChoice(rng string) imagev1.ImagePolicyChoice {
	return imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: rng}}
}

// alphabeticalChoice returns a policy choice with an alphabetical order.
func alphabeticalChoice(order string) imagev1.ImagePolicyChoice {
	return imagev1.ImagePolicyChoice{Alphabetical: &imagev1.AlphabeticalPolicy{Order: order}}
}

// numericalChoice returns a policy choice with a numerical order.
func numericalChoice(order string) imagev1.ImagePolicyChoice {
	return imagev1.ImagePolicyChoice{Numerical: &imagev1.NumericalPolicy{Order: order}}
}
