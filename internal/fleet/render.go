package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
	"github.com/uprev-dev/uprev/internal/printable"
)

// Format is how Render prints a table, named as kubectl's -o values.
type Format string

const (
	// FormatTable prints a table of tags, as `kubectl get` does.
	FormatTable Format = ""
	// FormatWide adds the image column and short digests.
	FormatWide Format = "wide"
	// FormatJSON prints the Table as JSON.
	FormatJSON Format = "json"
	// FormatYAML prints the Table as YAML.
	FormatYAML Format = "yaml"
)

// shortDigest is how many hex digits of a digest the wide format shows.
const shortDigest = 12

// Render prints t to w in format.
func Render(w io.Writer, t Table, format Format) error {
	switch format {
	case FormatTable, FormatWide:
		return renderTable(w, t, format == FormatWide)
	case FormatJSON:
		out, err := json.MarshalIndent(t, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the fleet table: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", out)
		return err
	case FormatYAML:
		out, err := yaml.Marshal(t)
		if err != nil {
			return fmt.Errorf("encoding the fleet table: %w", err)
		}
		_, err = w.Write(out)
		return err
	default:
		return fmt.Errorf("unknown output format %q (want one of wide, json, yaml)", format)
	}
}

// renderTable prints t as aligned columns, with images and digests when
// wide.
func renderTable(w io.Writer, t Table, wide bool) error {
	if len(t.Rows) == 0 {
		_, err := fmt.Fprintln(w, "No components found: no Sync target runs the image of an ImagePolicy.")
		return err
	}
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
	namespaces := manyNamespaces(t.Rows)
	var header []string
	if namespaces {
		header = append(header, "NAMESPACE")
	}
	header = append(header, "COMPONENT")
	if wide {
		header = append(header, "IMAGE")
	}
	header = append(header, "LATEST")
	for _, c := range t.Columns {
		header = append(header, c.Name)
	}
	if _, err := fmt.Fprintln(tw, strings.Join(header, "\t")); err != nil {
		return err
	}
	for _, r := range t.Rows {
		fields := rowFields(r, wide, t.now)
		if namespaces {
			fields = append([]string{r.Namespace}, fields...)
		}
		if _, err := fmt.Fprintln(tw, strings.Join(fields, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// manyNamespaces says whether rows come from more than one namespace, so
// the table needs a NAMESPACE column, as `kubectl get -A` has.
func manyNamespaces(rows []Row) bool {
	for _, r := range rows {
		if r.Namespace != rows[0].Namespace {
			return true
		}
	}
	return false
}

// rowFields returns the printed fields of a row, but its namespace.
func rowFields(r Row, wide bool, now time.Time) []string {
	fields := []string{r.Component}
	if wide {
		fields = append(fields, r.Image)
	}
	latest := "-"
	if r.Latest != nil {
		latest = versionText(*r.Latest, wide)
	}
	switch {
	case r.Hold != nil && r.Hold.Reason != "":
		// A tenant's words: one line, control characters escaped before
		// the columns are measured.
		latest += " (rejected: " + printable.String(strings.Join(strings.Fields(r.Hold.Reason), " ")) + ")"
	case r.Hold != nil:
		latest += " (held)"
	}
	if r.Waiting != nil {
		latest += " (" + r.Waiting.Tag + " waiting: " + WaitText(*r.Waiting, now) + ")"
	}
	fields = append(fields, latest)
	for _, c := range r.Cells {
		fields = append(fields, cellText(c, r.Latest, wide))
	}
	return fields
}

// cellText prints a cell: the versions a target runs and, unless they are
// the latest, its state. A version with the latest tag but another digest
// shows its digest, as every version does when wide.
func cellText(c Cell, latest *Version, wide bool) string {
	if c.State == NotDeployed {
		return "-"
	}
	text := "none"
	if len(c.Running) > 0 {
		versions := make([]string, len(c.Running))
		for i, v := range c.Running {
			versions[i] = versionText(v, wide || digestDiffers(v, latest))
		}
		text = strings.Join(versions, ",")
	}
	if c.State != UpToDate && c.State != Unknown {
		text += " (" + string(c.State) + ")"
	}
	return text
}

// digestDiffers says whether v has latest's tag pinned to another digest.
func digestDiffers(v Version, latest *Version) bool {
	return latest != nil && v.Tag == latest.Tag && v.Digest != "" && latest.Digest != "" && v.Digest != latest.Digest
}

// versionText prints a version: its tag, with a short digest when asked
// or when it has no tag.
func versionText(v Version, withDigest bool) string {
	text := v.Tag
	if (withDigest || v.Tag == "") && v.Digest != "" {
		algorithm, hex, _ := strings.Cut(v.Digest, ":")
		text += "@" + algorithm + ":" + hex[:min(len(hex), shortDigest)]
	}
	return text
}

// WaitText says at which gate a waiting version waits and for how long
// still: "age, 2d 4h"; the gate's reason instead when it names no time;
// "refused: unsigned" for a version whose signature does not verify.
func WaitText(w uprevv1.WaitingVersion, now time.Time) string {
	gateName := w.Gate
	if gateName == gate.MinReleaseAge {
		gateName = "age"
	}
	switch {
	case gateName == gate.Verify:
		return "refused: " + w.Reason
	case w.EligibleAt != nil:
		return gateName + ", " + remaining(w.EligibleAt.Sub(now))
	case w.Reason != "":
		return gateName + ", " + w.Reason
	default:
		return gateName
	}
}

// remaining shows the time a version still waits, to the minute: "2d 4h",
// "3h 10m", "5m"; "0m" once it is due.
func remaining(d time.Duration) string {
	d = d.Round(time.Minute)
	days, hours, minutes := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case d <= 0:
		return "0m"
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, hours)
	case hours > 0:
		return fmt.Sprintf("%dh %dm", hours, minutes)
	default:
		return fmt.Sprintf("%dm", minutes)
	}
}
