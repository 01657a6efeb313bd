package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"
)

// idUnsafe matches what may not be in an SPDX element ID.
var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// sbom returns the SPDX 2.3 document (JSON) of the Go binary data: the
// main module and every module linked into it, with the versions and
// checksums the binary's build information records, and the Go toolchain.
// It is read from the binary, not from go.mod, so that it lists what was
// built, no more.
func sbom(data []byte, version, platform string, created time.Time) ([]byte, error) {
	info, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("reading the binary's build information: %w", err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	main := &spdx.Package{
		PackageName:             info.Main.Path,
		PackageSPDXIdentifier:   "Package-uprev",
		PackageVersion:          version,
		PackageFileName:         "/uprev",
		PackageDownloadLocation: "https://" + info.Main.Path,
		PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: digest}},
		PackageExternalReferences: []*spdx.PackageExternalReference{
			purl("pkg:golang/" + info.Main.Path + "@" + version),
		},
	}
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      fmt.Sprintf("uprev-%s-%s", version, platform),
		DocumentNamespace: fmt.Sprintf("https://github.com/uprev-dev/uprev/spdx/%s/%s/%s", version, platform, digest),
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "uprev-hack-image"}},
			Created:  created.UTC().Format(time.RFC3339),
		},
		Packages: []*spdx.Package{main},
		Relationships: []*spdx.Relationship{{
			RefA:         common.MakeDocElementID("", "DOCUMENT"),
			RefB:         common.MakeDocElementID("", string(main.PackageSPDXIdentifier)),
			Relationship: common.TypeRelationshipDescribe,
		}},
	}
	add := func(name, version, checksum string, ref *spdx.PackageExternalReference) {
		p := &spdx.Package{
			PackageName:               name,
			PackageSPDXIdentifier:     common.ElementID("Package-" + idUnsafe.ReplaceAllString(name+"-"+version, "-")),
			PackageVersion:            version,
			PackageDownloadLocation:   "NOASSERTION",
			PackageExternalReferences: []*spdx.PackageExternalReference{ref},
		}
		if checksum != "" {
			p.PackageChecksums = []common.Checksum{{Algorithm: common.SHA256, Value: checksum}}
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA:         common.MakeDocElementID("", string(main.PackageSPDXIdentifier)),
			RefB:         common.MakeDocElementID("", string(p.PackageSPDXIdentifier)),
			Relationship: common.TypeRelationshipDependsOn,
		})
	}
	add("go", info.GoVersion, "", purl("pkg:golang/stdlib@"+info.GoVersion))
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		add(dep.Path, dep.Version, moduleSum(dep.Sum), purl("pkg:golang/"+dep.Path+"@"+dep.Version))
	}
	var out bytes.Buffer
	if err := spdxjson.Write(doc, &out, spdxjson.Indent("  ")); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// purl is an SPDX reference to a package URL.
func purl(locator string) *spdx.PackageExternalReference {
	return &spdx.PackageExternalReference{Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: locator}
}

// moduleSum turns a go.sum hash ("h1:<base64 SHA-256>", the hash of the
// module's file tree that the Go checksum database publishes) into hex, the
// form SPDX checksums take, as syft records Go modules; "" when it is not
// one.
func moduleSum(sum string) string {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return ""
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != sha256.Size {
		return ""
	}
	return hex.EncodeToString(b)
}
