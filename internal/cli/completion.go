package cli

import (
	"context"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// completionTimeout bounds the reads shell completion makes, so that a
// cluster out of reach does not hang the shell.
const completionTimeout = 5 * time.Second

// completeNames returns the completion of the NAME arguments of a command
// acting on the objects of kinds (each given by an empty object or list of
// it): the names of those objects in the namespace of cf (-n, else the
// kubeconfig's) that start with what is typed, less those already given;
// the first kind is required, the others are left out when not
// installed. single says the command takes one name only.
func completeNames(cf *clusterFlags, single bool, kinds ...func() runtime.Object) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if single && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := cf.namespace()
		if err != nil {
			return completionError(err)
		}
		ctx, cancel := completionContext(cmd)
		defer cancel()
		c, err := cf.client(io.Discard)
		if err != nil {
			return completionError(err)
		}
		var names []string
		for i, kind := range kinds {
			found, err := objectNames(ctx, c, kind(), ns)
			if err != nil {
				if i > 0 && meta.IsNoMatchError(err) {
					continue
				}
				return completionError(err)
			}
			names = append(names, found...)
		}
		return matching(names, args, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNamespaces makes -n/--namespace of cmd complete to the names of
// the cluster's namespaces.
func completeNamespaces(cmd *cobra.Command, cf *clusterFlags) {
	complete := func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := completionContext(cmd)
		defer cancel()
		c, err := cf.client(io.Discard)
		if err != nil {
			return completionError(err)
		}
		namespaces := &metav1.PartialObjectMetadataList{}
		namespaces.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
		names, err := objectNames(ctx, c, namespaces, "")
		if err != nil {
			return completionError(err)
		}
		return matching(names, nil, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	// The flag is there: an error is a mistake in the command's making.
	cobra.CheckErr(cmd.RegisterFlagCompletionFunc("namespace", complete))
}

// matching returns the names that start with toComplete and are not in
// given, sorted, each once.
func matching(names, given []string, toComplete string) []cobra.Completion {
	var out []cobra.Completion
	for _, name := range names {
		if strings.HasPrefix(name, toComplete) && !slices.Contains(given, name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// objectNames returns the names of the objects of the kind of example (an
// object or a list of them) in namespace, reading their metadata only.
func objectNames(ctx context.Context, c client.Client, example runtime.Object, namespace string) ([]string, error) {
	list, ok := example.(*metav1.PartialObjectMetadataList)
	if !ok {
		gvk, err := apiutil.GVKForObject(example, c.Scheme())
		if err != nil {
			return nil, err
		}
		if !strings.HasSuffix(gvk.Kind, "List") {
			gvk.Kind += "List"
		}
		list = &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk)
	}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	names := make([]string, len(list.Items))
	for i, item := range list.Items {
		names[i] = item.Name
	}
	return names, nil
}

// completionContext is the context of the reads of a completion: the
// command's, bounded by completionTimeout.
func completionContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, completionTimeout)
}

// completionError ends a completion that could not read the cluster: no
// names, and the error in cobra's debug log (BASH_COMP_DEBUG_FILE).
func completionError(err error) ([]cobra.Completion, cobra.ShellCompDirective) {
	cobra.CompDebugln(err.Error(), false)
	return nil, cobra.ShellCompDirectiveError
}
