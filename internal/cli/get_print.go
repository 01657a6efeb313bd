package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/liggitt/tabwriter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/printable"
)

// tableWriter writes tables as kubectl does: a header in capitals, then
// one line per row, in columns. It keeps one tabwriter, which remembers
// the widths of the columns it printed, so that the rows --watch prints
// later line up with the table.
type tableWriter struct {
	tw *tabwriter.Writer
}

// newTableWriter returns a tableWriter printing to w.
func newTableWriter(w io.Writer) *tableWriter {
	return &tableWriter{tw: printers.GetNewTabWriter(&trimWriter{w: w})}
}

// print writes t's rows, after a header line when header is true; wide
// columns only when wide, NAMESPACE first when namespaced.
func (p *tableWriter) print(t *Table, wide, namespaced, header bool) error {
	var headers []string
	if namespaced {
		headers = append(headers, "NAMESPACE")
	}
	for _, c := range t.Columns {
		if wide || !c.Wide {
			headers = append(headers, c.Header)
		}
	}
	if header {
		if _, err := fmt.Fprintln(p.tw, strings.Join(headers, "\t")); err != nil {
			return err
		}
	}
	for _, r := range t.Rows {
		var cells []string
		if namespaced {
			cells = append(cells, cell(r.Namespace))
		}
		for i, c := range t.Columns {
			if wide || !c.Wide {
				cells = append(cells, cell(r.Cells[i]))
			}
		}
		if _, err := fmt.Fprintln(p.tw, strings.Join(cells, "\t")); err != nil {
			return err
		}
	}
	return p.tw.Flush()
}

// trimWriter writes lines without the spaces they end with: empty last
// cells leave the padding of the cells before them.
type trimWriter struct {
	w    io.Writer
	line []byte
}

// Write writes the lines p completes, each trimmed; the rest waits for its
// newline.
func (t *trimWriter) Write(p []byte) (int, error) {
	t.line = append(t.line, p...)
	for {
		i := bytes.IndexByte(t.line, '\n')
		if i < 0 {
			return len(p), nil
		}
		if _, err := fmt.Fprintln(t.w, strings.TrimRight(string(t.line[:i]), " ")); err != nil {
			return 0, err
		}
		t.line = t.line[i+1:]
	}
}

// printNames writes the rows' objects as kubectl's -o name does:
// <kind>.<group>/<name>, one a line. Rows that are no object (holds) have
// no name.
func printNames(w io.Writer, t *Table) error {
	for _, r := range t.Rows {
		obj, ok := r.Object.(client.Object)
		if !ok {
			return errors.New("-o name prints objects, and these rows are none; use -o yaml or -o json")
		}
		gvk := obj.GetObjectKind().GroupVersionKind()
		if _, err := fmt.Fprintf(w, "%s.%s/%s\n", strings.ToLower(gvk.Kind), gvk.Group, obj.GetName()); err != nil {
			return err
		}
	}
	return nil
}

// cell makes s fit in one cell of a table: one line, no tabs, every
// control character shown escaped (printable.String), before the columns
// are measured.
func cell(s string) string {
	return printable.String(strings.Join(strings.Fields(s), " "))
}

// objectList is what -o yaml and -o json print for several rows, as
// kubectl prints a list.
type objectList struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Items      []any          `json:"items"`
}

// printObjects writes the objects of t's rows in format (yaml or json):
// the object alone when one was named and it is a Kubernetes object, a
// List of them otherwise.
func printObjects(w io.Writer, t *Table, format string, named bool) error {
	var out any
	if _, isObject := singleObject(t); named && isObject {
		out = t.Rows[0].Object
	} else {
		list := objectList{APIVersion: "v1", Kind: "List", Metadata: map[string]any{"resourceVersion": ""}, Items: []any{}}
		for _, r := range t.Rows {
			list.Items = append(list.Items, r.Object)
		}
		out = list
	}
	var (
		b   []byte
		err error
	)
	if format == outputJSON {
		b, err = marshalJSON(out)
	} else {
		b, err = printable.YAML(out)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", format, err)
	}
	_, err = w.Write(b)
	return err
}

// marshalJSON writes v as kubectl writes JSON: keys sorted, indented by
// four spaces, a newline at the end; DEL and the C1 controls, which
// encoding/json writes as they are, escaped (\u007f) too.
func marshalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, err
	}
	b, err = json.MarshalIndent(generic, "", "    ")
	return append(printable.JSON(b), '\n'), err
}

// singleObject returns the object of t's only row when it is a Kubernetes
// object.
func singleObject(t *Table) (client.Object, bool) {
	if len(t.Rows) != 1 {
		return nil, false
	}
	obj, ok := t.Rows[0].Object.(client.Object)
	return obj, ok
}

// age is how long before now t was, as kubectl shows ages: "5m", "3d".
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// ageOf is age for an optional time, "" when it is unset.
func ageOf(t *metav1.Time, now time.Time) string {
	if t == nil {
		return ""
	}
	return age(*t, now)
}

// readyCells returns the Ready condition's status ("Unknown" when there is
// none) and message.
func readyCells(conditions []metav1.Condition) (ready, message string) {
	c := findCondition(conditions, meta.ReadyCondition)
	if c == nil {
		return string(metav1.ConditionUnknown), ""
	}
	return string(c.Status), c.Message
}

// findCondition returns the condition of type t, or nil.
func findCondition(conditions []metav1.Condition, t string) *metav1.Condition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}

// boolCell shows a flag as flux's tables do: True or False.
func boolCell(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// shortSHA abbreviates a commit SHA to 10 characters, as commit trailers
// and `uprev plan` do.
func shortSHA(sha string) string {
	return sha[:min(len(sha), 10)]
}

// shortRevision abbreviates the commit of a revision `<ref>@sha1:<commit>`.
func shortRevision(rev string) string {
	ref, sha, ok := strings.Cut(rev, "@sha1:")
	if !ok {
		return rev
	}
	return ref + "@sha1:" + shortSHA(sha)
}
