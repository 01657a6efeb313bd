package dashboard

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/uprev-dev/uprev/internal/fleet"
	"github.com/uprev-dev/uprev/internal/printable"
)

// funcs are the functions the page's template calls.
var funcs = template.FuncMap{
	"objectURL": objectURL,
	"keyURL":    keyURL,
	"short":     short,
	"stateText": stateText,
	"timeText":  timeText,
	"ago":       ago,
	"waitText":  fleet.WaitText,
	// tenantText shows text a tenant wrote (a rejection's reason) on one
	// line, its control characters escaped; the template escapes HTML.
	"tenantText": tenantText,
}

// tenantText returns s on one line, with every control character shown
// escaped (printable.String).
func tenantText(s string) string {
	return printable.String(strings.Join(strings.Fields(s), " "))
}

// objectURL is the link to an object's YAML.
func objectURL(kind, namespace, name string) string {
	return "/object/" + url.PathEscape(kind) + "/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

// keyURL is the link to the YAML of the object of a kind named
// `<namespace>/<name>`.
func keyURL(kind, key string) string {
	namespace, name, _ := strings.Cut(key, "/")
	return objectURL(kind, namespace, name)
}

// shortDigits is how many hex digits of a digest or commit the page shows;
// the full value is in the element's title.
const shortDigits = 12

// short shortens a digest (sha256:...), a revision (main@sha1:...) or a
// commit SHA to shortDigits hex digits.
func short(s string) string {
	prefix, hex := "", s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		prefix, hex = s[:i+1], s[i+1:]
	}
	return prefix + hex[:min(len(hex), shortDigits)]
}

// stateText names a cell's state on the page: "current" for up to date.
func stateText(s fleet.State) string {
	switch s {
	case fleet.UpToDate:
		return "current"
	case fleet.NotDeployed:
		return "not deployed"
	default:
		return string(s)
	}
}

// timeText prints a time in UTC to the second.
func timeText(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// ago says how long before now t was: "40s ago", "3m ago", "2h 5m ago",
// "3d ago".
func ago(now, t time.Time) string {
	d := max(0, now.Sub(t))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm ago", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
	}
}
