package signing

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// LargeSPDX is an SPDX 2.3 document of at least size bytes listing
// packages with their purls, as the SBOM of a large image does.
func LargeSPDX(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"spdxVersion":"SPDX-2.3","dataLicense":"CC0-1.0","SPDXID":"SPDXRef-DOCUMENT","name":"app","packages":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"SPDXID":"SPDXRef-Package-%d","name":"pkg-%d","versionInfo":"1.%d.0","downloadLocation":"NOASSERTION",`+
			`"licenseConcluded":"MIT","externalRefs":[{"referenceCategory":"PACKAGE-MANAGER","referenceType":"purl",`+
			`"referenceLocator":"pkg:golang/example.com/pkg-%d@v1.%d.0"}]}`, i, i, i, i, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// AttestAltered attests predicate, of predicateType, about repo@digest
// with k in the cosign 3 layout, as Attest does, then changes the last
// byte of the predicate's first string before pushing the bundle, as
// someone tampering with it on its way would: the signature no longer
// matches the payload.
func (k *Key) AttestAltered(t testing.TB, reg *registry.Registry, repo, digest, predicateType string, predicate []byte) string {
	t.Helper()
	const payloadType = "application/vnd.in-toto+json"
	body := attestation(reg.Image(repo), digest, predicateType, predicate)
	sig := k.sign(t, dsse.PAE(payloadType, body))
	return k.pushSigned(t, reg, repo, digest, payloadType, alterPredicate(body), sig)
}

// alterPredicate changes the last byte of the first string of the
// predicate of the statement body, in a copy.
func alterPredicate(body []byte) []byte {
	altered := bytes.Clone(body)
	i := bytes.Index(altered, []byte(`"predicate":`)) + len(`"predicate":`)
	i += bytes.IndexByte(altered[i:], '"') + 1
	i += bytes.IndexByte(altered[i:], '"') - 1
	altered[i] ^= 1
	return altered
}
