package dashboard

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ReleaseCommand returns the `uprev release-hold` command that releases
// the hold of automation (in namespace) on policy (`<namespace>/<name>`,
// or a name in the automation's namespace), for a person to paste into a
// shell. The policy comes from status or an annotation a tenant can
// write, so nothing of it is trusted: every name must be a valid
// Kubernetes object name (namespace a DNS-1123 label, automation and
// policy DNS-1123 subdomains), else the command is refused with an error
// naming the field; and every argument is shell-quoted, so that the
// command runs `uprev` and nothing else.
func ReleaseCommand(namespace, automation, policy string) (string, error) {
	policyNamespace, policyName, qualified := strings.Cut(policy, "/")
	if !qualified {
		policyNamespace, policyName = namespace, policy
	}
	for _, name := range []struct {
		field, value string
		errs         []string
	}{
		{"namespace", namespace, validation.IsDNS1123Label(namespace)},
		{"automation name", automation, validation.IsDNS1123Subdomain(automation)},
		{"policy namespace", policyNamespace, validation.IsDNS1123Label(policyNamespace)},
		{"policy name", policyName, validation.IsDNS1123Subdomain(policyName)},
	} {
		if len(name.errs) > 0 {
			return "", fmt.Errorf("%s %q is not a valid object name: %s", name.field, name.value, strings.Join(name.errs, "; "))
		}
	}
	if policyNamespace != namespace {
		policyName = policyNamespace + "/" + policyName
	}
	args := []string{"uprev", "release-hold", automation, policyName, "-n", namespace}
	for i, arg := range args {
		args[i] = shellQuote(arg)
	}
	return strings.Join(args, " "), nil
}

// shellQuote returns s as one word of a POSIX shell: as it is when it
// has only characters no shell treats specially, else in single quotes,
// inside which a shell reads every character as itself (a single quote
// in s closes the quotes, is escaped with a backslash, and reopens them).
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !safeInShell(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// safeInShell says whether r means itself anywhere in a shell word.
func safeInShell(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r)
}
