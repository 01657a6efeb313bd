package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/liggitt/tabwriter"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	kubectlget "k8s.io/kubectl/pkg/cmd/get"
)

// templateOutput is what -o jsonpath=, jsonpath-file=, custom-columns= or
// custom-columns-file= prints with: kubectl's own printers.
type templateOutput struct {
	printer printers.ResourcePrinter
	// columns says the printer is custom-columns', which prints the
	// objects of a table one by one, its header once.
	columns bool
	// tw is the writer of custom columns' lines, kept for the lines
	// --watch prints later, so that they line up with the first.
	tw *tabwriter.Writer
}

// newTemplateOutput returns the printer of the output format, as kubectl
// reads it; nil when the format is none of the four.
func newTemplateOutput(output string, noHeaders bool) (*templateOutput, error) {
	format, arg, ok := strings.Cut(output, "=")
	if !ok {
		return nil, nil
	}
	switch format {
	case "jsonpath", "jsonpath-file":
		tmpl := arg
		if format == "jsonpath-file" {
			b, err := os.ReadFile(arg)
			if err != nil {
				return nil, fmt.Errorf("reading the template: %w", err)
			}
			tmpl = string(b)
		}
		p, err := printers.NewJSONPathPrinter(tmpl)
		if err != nil {
			return nil, fmt.Errorf("parsing the jsonpath template %q: %w", tmpl, err)
		}
		// As kubectl's --allow-missing-template-keys, true by default.
		p.AllowMissingKeys(true)
		return &templateOutput{printer: p}, nil
	case "custom-columns":
		p, err := kubectlget.NewCustomColumnsPrinterFromSpec(arg, unstructured.UnstructuredJSONScheme, noHeaders)
		if err != nil {
			return nil, err
		}
		return &templateOutput{printer: p, columns: true}, nil
	case "custom-columns-file":
		f, err := os.Open(arg)
		if err != nil {
			return nil, fmt.Errorf("reading the template: %w", err)
		}
		defer func() { _ = f.Close() }() // read only
		p, err := kubectlget.NewCustomColumnsPrinterFromTemplate(f, unstructured.UnstructuredJSONScheme)
		if err != nil {
			return nil, err
		}
		p.NoHeaders = noHeaders
		return &templateOutput{printer: p, columns: true}, nil
	}
	return nil, nil
}

// print writes the objects of t's rows to w (the same w every time)
// through the template: for
// jsonpath, the object alone when one was named and it is a Kubernetes
// object, a v1 List of them otherwise, as -o json prints them; for
// custom columns, a line per object.
func (o *templateOutput) print(w io.Writer, t *Table, named bool) error {
	objs := make([]*unstructured.Unstructured, len(t.Rows))
	for i, r := range t.Rows {
		u, err := toUnstructured(r.Object)
		if err != nil {
			return err
		}
		objs[i] = u
	}
	if o.columns {
		// One writer for all lines, so that their columns line up.
		if o.tw == nil {
			o.tw = printers.GetNewTabWriter(w)
		}
		for _, u := range objs {
			if err := o.printer.PrintObj(u, o.tw); err != nil {
				return err
			}
		}
		return o.tw.Flush()
	}
	if _, isObject := singleObject(t); named && isObject {
		return o.printer.PrintObj(objs[0], w)
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{
		"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""},
	}}
	for _, u := range objs {
		list.Items = append(list.Items, *u)
	}
	return o.printer.PrintObj(list, w)
}

// toUnstructured returns what -o json prints for a row's object, as a
// generic object the templates walk.
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(b, &u.Object); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", obj, err)
	}
	return u, nil
}

// render returns what the template prints of obj alone, without a
// header: what --watch compares to tell whether an object's row changed.
func (o *templateOutput) render(obj any) string {
	u, err := toUnstructured(obj)
	if err != nil {
		return err.Error()
	}
	p := o.printer
	if columns, ok := p.(*kubectlget.CustomColumnsPrinter); ok {
		p = &kubectlget.CustomColumnsPrinter{Columns: columns.Columns, Decoder: columns.Decoder, NoHeaders: true}
	}
	var b bytes.Buffer
	if err := p.PrintObj(u, &b); err != nil {
		return err.Error()
	}
	return b.String()
}
