package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Noun is one kind of thing `uprev get` lists, and one subcommand of it:
// `uprev get <noun> [NAME...]`. getNouns lists them; a new noun is one more
// entry there.
type Noun struct {
	// Name is the subcommand, plural as kubectl's resources are: "syncs".
	Name string
	// Aliases are other names for it: the singular, the kind, a short name.
	Aliases []string
	// Short is its one-line help.
	Short string
	// Read reads the table to show from the cluster.
	Read func(ctx context.Context, c client.Reader, q Query) (*Table, error)
	// Watches returns an empty list of the kind whose objects the rows
	// come from, which --watch watches; a row's object is one of them, or
	// (holds) the row is read from one.
	Watches func() client.ObjectList
	// AlsoWatches, when set, returns an empty list of a second kind the
	// rows come from (holds: Flux's ImageUpdateAutomations), which --watch
	// watches too where the kind is installed.
	AlsoWatches func() client.ObjectList
}

// watched returns the empty lists of the kinds --watch watches for n,
// the optional one (AlsoWatches) last.
func (n Noun) watched() []client.ObjectList {
	lists := []client.ObjectList{n.Watches()}
	if n.AlsoWatches != nil {
		lists = append(lists, n.AlsoWatches())
	}
	return lists
}

// Query says what `uprev get` asks a noun for.
type Query struct {
	// Namespace to read; empty means every namespace (-A).
	Namespace string
	// Names narrows the table to these objects; a missing one is an error
	// (see notFound). Empty means all.
	Names []string
	// Selector narrows a table of all objects to those whose labels it
	// matches (-l); nil means all.
	Selector labels.Selector
	// Now is the time ages are measured against.
	Now time.Time
}

// Table is what a noun shows.
type Table struct {
	// Columns head the table; `uprev get -A` puts NAMESPACE before them.
	Columns []Column
	// Rows are the things listed, in the order shown.
	Rows []Row
}

// Column is one column of a Table.
type Column struct {
	// Header is its title, in capitals as kubectl prints them.
	Header string
	// Wide columns are shown with -o wide only.
	Wide bool
}

// Row is one line of a Table.
type Row struct {
	// Namespace of the thing listed, shown with -A.
	Namespace string
	// Cells are the values, one per column of the table.
	Cells []string
	// Object is what -o yaml and -o json print for the row: the object
	// itself (its apiVersion and kind set), or a record of what the row
	// shows.
	Object any
}

// getNouns returns the nouns of `uprev get`, in the order its help lists
// them.
func getNouns() []Noun {
	return []Noun{
		policiesNoun(), repositoriesNoun(), automationsNoun(), fluxAutomationsNoun(), syncsNoun(), syncTargetsNoun(),
		holdsNoun(), gatesNoun(), sourcesNoun(),
	}
}

// Output formats of `uprev get -o`.
const (
	outputTable = ""
	outputWide  = "wide"
	outputYAML  = "yaml"
	outputJSON  = "json"
	outputName  = "name"
)

// getOptions are the flags `uprev get` shares among its nouns.
type getOptions struct {
	cluster       *clusterFlags
	allNamespaces bool
	output        string
	selector      string
	watch         bool
	noHeaders     bool
	// template prints -o jsonpath= and custom-columns=; nil for the
	// other formats.
	template *templateOutput
	// table prints tables, remembering their columns' widths.
	table *tableWriter
}

// outputFormats lists the formats of -o for help and errors.
const outputFormats = "wide, yaml, json, name, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=SPEC or custom-columns-file=FILE"

// getLong is the help of `uprev get`.
const getLong = `Lists uprev's objects, or what their status says, as kubectl get does: in the
namespace of -n (default: the kubeconfig context's), or in every namespace
with -A; those whose labels match -l only; as a table, a wider table (-o
wide), YAML, JSON, the objects' names (-o name), or through a JSONPath
template or custom columns (-o jsonpath=..., -o custom-columns=...). With
--watch, prints the rows again as their objects change, until interrupted.`

// getExample shows `uprev get` at work.
const getExample = `  uprev get syncs -A
  uprev get policies -n uprev-system -o wide
  uprev get holds -A
  uprev get fleet -A
  uprev get automation fleet -n uprev-system -o yaml
  uprev get synctargets -l uprev.dev/sync=prod -n uprev-system
  uprev get policies -A -o custom-columns=NAME:.metadata.name,TAG:.status.latestRef.tag`

// newGetCommand returns `uprev get` with a subcommand per noun.
func newGetCommand(opts Options) *cobra.Command {
	o := &getOptions{}
	nouns := getNouns()
	cmd := &cobra.Command{
		Use:     "get NOUN [NAME...]",
		Short:   "List " + nounList(nouns, ", ", " or ") + "; show the fleet",
		Long:    getLong,
		Example: getExample,
		GroupID: groupInspect,
		// The distance cobra suggests commands within, for nouns too.
		SuggestionsMinimumDistance: 2,
		// NOUN is a subcommand; what reaches here is no noun.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("a noun is required: %s", nounList(nouns, ", ", " or "))
			}
			err := fmt.Errorf("unknown noun %q: want %s", args[0], nounList(nouns, ", ", " or "))
			if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
				err = fmt.Errorf("%w (did you mean %s?)", err, strings.Join(suggestions, " or "))
			}
			return err
		},
	}
	fs := cmd.PersistentFlags()
	o.cluster = newClusterFlags(fs)
	completeNamespaces(cmd, o.cluster)
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List in every namespace; the NAMESPACE column comes first.")
	fs.StringVarP(&o.output, "output", "o", "", "Output format: "+outputFormats+", as kubectl's; default: a table.")
	fs.StringVarP(&o.selector, "selector", "l", "", "Label selector: list only the objects whose labels match, as kubectl's -l (holds: of the automations that match).")
	fs.BoolVarP(&o.watch, "watch", "w", false, "After listing, print the rows of each object that changes, until interrupted.")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "Print tables without their header line.")
	for _, n := range nouns {
		cmd.AddCommand(o.nounCommand(n, opts))
	}
	cmd.AddCommand(o.fleetCommand(opts))
	return cmd
}

// nounList joins the names of nouns, the last two with last.
func nounList(nouns []Noun, sep, last string) string {
	names := make([]string, len(nouns))
	for i, n := range nouns {
		names[i] = n.Name
	}
	if len(names) < 2 {
		return strings.Join(names, sep)
	}
	return strings.Join(names[:len(names)-1], sep) + last + names[len(names)-1]
}

// nounCommand returns `uprev get <noun>`.
func (o *getOptions) nounCommand(n Noun, opts Options) *cobra.Command {
	return &cobra.Command{
		Use:     n.Name + " [NAME...]",
		Aliases: n.Aliases,
		Short:   n.Short,
		RunE: func(cmd *cobra.Command, names []string) error {
			return o.get(cmd.Context(), opts, n, names)
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if o.allNamespaces { // no names with -A
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var kinds []func() runtime.Object
			for _, list := range n.watched() {
				kinds = append(kinds, func() runtime.Object { return list })
			}
			return completeNames(o.cluster, false, kinds...)(cmd, args, toComplete)
		},
	}
}

// get reads the table of n and prints it; with --watch, it then prints the
// rows of each object that changes.
func (o *getOptions) get(ctx context.Context, opts Options, n Noun, names []string) error {
	tmpl, err := newTemplateOutput(o.output, o.noHeaders)
	if err != nil {
		return err
	}
	o.template = tmpl
	switch o.output {
	case outputTable, outputWide, outputYAML, outputJSON, outputName:
	default:
		if tmpl == nil {
			return fmt.Errorf("unknown output format %q: want %s", o.output, outputFormats)
		}
	}
	if o.allNamespaces && len(names) > 0 {
		return errors.New("names cannot be looked up across all namespaces (-A); give a namespace with -n")
	}
	q := Query{Names: names, Now: opts.Clock.Now()}
	if o.selector != "" {
		if len(names) > 0 {
			return errors.New("names cannot be given with a selector (-l)")
		}
		selector, err := labels.Parse(o.selector)
		if err != nil {
			return fmt.Errorf("parsing the selector %q: %w", o.selector, err)
		}
		q.Selector = selector
	}
	if !o.allNamespaces {
		ns, err := o.cluster.namespace()
		if err != nil {
			return err
		}
		q.Namespace = ns
	}
	c, err := o.cluster.client(opts.ErrOut)
	if err != nil {
		return err
	}
	var from []watchFrom
	if o.watch {
		// The watch starts where this list ends: what changes while the
		// table is read is printed again, never lost.
		if from, err = watchStarts(ctx, c, n, q); err != nil {
			return err
		}
	}
	t, err := n.Read(ctx, c, q)
	if err != nil {
		return err
	}
	// One writer for the table and the rows --watch prints after it, so
	// that they line up.
	o.table = newTableWriter(opts.Out)
	if len(t.Rows) == 0 && (o.output == outputTable || o.output == outputWide || (tmpl != nil && tmpl.columns)) {
		if o.allNamespaces {
			_, _ = fmt.Fprintf(opts.ErrOut, "No %s found.\n", n.Name)
		} else {
			_, _ = fmt.Fprintf(opts.ErrOut, "No %s found in namespace %s.\n", n.Name, q.Namespace)
		}
	} else if err := o.print(opts.Out, t, len(names) == 1, !o.noHeaders); err != nil {
		return err
	}
	if !o.watch {
		return nil
	}
	return o.watchRows(ctx, opts, c, n, q, from, t)
}

// print prints t in the output format; header says whether a table gets
// its header line.
func (o *getOptions) print(w io.Writer, t *Table, named, header bool) error {
	if o.template != nil {
		return o.template.print(w, t, named)
	}
	switch o.output {
	case outputYAML, outputJSON:
		return printObjects(w, t, o.output, named)
	case outputName:
		return printNames(w, t)
	default:
		return o.table.print(t, o.output == outputWide, o.allNamespaces, header)
	}
}
