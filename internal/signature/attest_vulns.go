package signature

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	vulns02 "github.com/in-toto/attestation/go/predicates/vulns/v02"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// CosignVulnV1 is cosign's vulnerability predicate (`cosign attest --type
// vuln`): a scanner's own report (Trivy's or Grype's JSON) in
// scanner.result.
const CosignVulnV1 = "https://cosign.sigstore.dev/attestation/vuln/v1"

// scan is what one vulnerability scan attestation says: when it finished
// and what it found.
type scan struct {
	at       time.Time
	findings []finding
}

// finding is one vulnerability a scan found, with the rank of its highest
// severity in severities.
type finding struct {
	id   string
	rank int
}

// checkVulnerabilities returns why the newest scan among statements (of
// the in-toto or cosign vulnerability predicate) does not pass want;
// empty when it does.
func checkVulnerabilities(statements []*intoto.Statement, want VulnerabilityRequirement, now time.Time) string {
	var newest *scan
	for _, st := range statements {
		s, ok := scanOf(st)
		if ok && (newest == nil || s.at.After(newest.at)) {
			newest = &s
		}
	}
	if newest == nil {
		return "no vulnerability scan attestation"
	}
	if age := now.Sub(newest.at); age > want.MaxAge {
		return fmt.Sprintf("the newest scan, of %s, is older than %s", newest.at.UTC().Format(time.RFC3339), want.MaxAge)
	}
	limit := severityRank(want.MaxSeverity)
	notAffected := notAffectedOf(statements)
	var above []string
	for _, f := range newest.findings {
		if f.rank > limit && !notAffected[f.id] {
			above = append(above, f.id)
		}
	}
	if len(above) > 0 {
		return fmt.Sprintf("%d finding(s) above %s: %s", len(above), want.MaxSeverity, strings.Join(above[:min(len(above), 5)], ", "))
	}
	return ""
}

// scanOf reads a vulnerability scan statement; ok is false for another
// predicate, or one that does not decode.
func scanOf(st *intoto.Statement) (s scan, ok bool) {
	switch st.GetPredicateType() {
	case VulnsV02:
		var v vulns02.Vulns
		if predicate(st, &v) != nil {
			return s, false
		}
		s.at = v.GetMetadata().GetScanFinishedOn().AsTime()
		for _, r := range v.GetScanner().GetResult() {
			s.findings = append(s.findings, finding{id: r.GetId(), rank: worst(r)})
		}
		return s, true
	case CosignVulnV1:
		return cosignScanOf(st)
	default:
		return s, false
	}
}

// cosignVuln is cosign's vulnerability predicate (CosignVulnPredicate of
// cosign's attestation package, which uprev does not depend on) with the
// findings of the scanner reports cosign is given: Trivy's JSON
// (Results[].Vulnerabilities[]) and Grype's (matches[].vulnerability).
type cosignVuln struct {
	Scanner struct {
		Result struct {
			Results []struct {
				Vulnerabilities []struct {
					VulnerabilityID string `json:"VulnerabilityID"`
					Severity        string `json:"Severity"`
				} `json:"Vulnerabilities"`
			} `json:"Results"`
			Matches []struct {
				Vulnerability struct {
					ID       string `json:"id"`
					Severity string `json:"severity"`
				} `json:"vulnerability"`
			} `json:"matches"`
		} `json:"result"`
	} `json:"scanner"`
	Metadata struct {
		ScanFinishedOn time.Time `json:"scanFinishedOn"`
	} `json:"metadata"`
}

// cosignScanOf reads a statement of cosign's vulnerability predicate. A
// scan without its finishing time does not count: its age is unknown.
func cosignScanOf(st *intoto.Statement) (s scan, ok bool) {
	data, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return s, false
	}
	var v cosignVuln
	if json.Unmarshal(data, &v) != nil || v.Metadata.ScanFinishedOn.IsZero() {
		return s, false
	}
	s.at = v.Metadata.ScanFinishedOn
	for _, r := range v.Scanner.Result.Results {
		for _, f := range r.Vulnerabilities {
			s.findings = append(s.findings, finding{id: f.VulnerabilityID, rank: max(severityRank(f.Severity), 0)})
		}
	}
	for _, m := range v.Scanner.Result.Matches {
		s.findings = append(s.findings, finding{id: m.Vulnerability.ID, rank: max(severityRank(m.Vulnerability.Severity), 0)})
	}
	return s, true
}

// openVEXPredicate is the prefix of OpenVEX predicate types
// (https://openvex.dev/ns/v0.2.0).
const openVEXPredicate = "https://openvex.dev/ns"

// openVEX is the part of an OpenVEX document that says a vulnerability
// does not affect the product. (github.com/openvex/go-vex is not among the
// modules uprev may use; these are its field names.)
type openVEX struct {
	Statements []struct {
		Vulnerability json.RawMessage `json:"vulnerability"`
		Status        string          `json:"status"`
	} `json:"statements"`
}

// notAffectedOf returns the vulnerabilities that OpenVEX statements
// among statements say do not affect the image (status not_affected).
// A statement counts for the image whose referrers hold it: its subject
// is the image's digest.
func notAffectedOf(statements []*intoto.Statement) map[string]bool {
	out := map[string]bool{}
	for _, st := range statements {
		if !strings.HasPrefix(st.GetPredicateType(), openVEXPredicate) {
			continue
		}
		data, err := protojson.Marshal(st.GetPredicate())
		if err != nil {
			continue
		}
		var doc openVEX
		if json.Unmarshal(data, &doc) != nil {
			continue
		}
		for _, s := range doc.Statements {
			if s.Status != "not_affected" {
				continue
			}
			// v0.2 names it {"name": "CVE-…"}; v0.0 as a string.
			var v struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(s.Vulnerability, &v) != nil {
				_ = json.Unmarshal(s.Vulnerability, &v.Name)
			}
			if v.Name != "" {
				out[v.Name] = true
			}
		}
	}
	return out
}

// worst is the rank of the highest severity a result states: a severity
// name, or a CVSS score (9 and above is critical).
func worst(r *vulns02.Result) int {
	rank := 0
	for _, s := range r.GetSeverity() {
		n := severityRank(s.GetScore())
		if n < 0 {
			var score float64
			if _, err := fmt.Sscanf(s.GetScore(), "%g", &score); err != nil {
				continue
			}
			switch {
			case score >= 9:
				n = 4
			case score >= 7:
				n = 3
			case score >= 4:
				n = 2
			case score > 0:
				n = 1
			}
		}
		rank = max(rank, n)
	}
	return rank
}

// severityRank is the rank of a severity name in severities, -1 for
// another word.
func severityRank(name string) int {
	for i, s := range severities {
		if strings.EqualFold(s, name) {
			return i
		}
	}
	return -1
}
