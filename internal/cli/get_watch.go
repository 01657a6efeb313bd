package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// watchFrom is one kind --watch watches, and the resource version its
// watch starts from.
type watchFrom struct {
	list  client.ObjectList
	since string
}

// watchStarts returns the kinds --watch watches for n and where each
// watch starts; the optional kind (AlsoWatches) is left out when it is not
// installed.
func watchStarts(ctx context.Context, c client.Reader, n Noun, q Query) ([]watchFrom, error) {
	var from []watchFrom
	for i, list := range n.watched() {
		since, err := listVersion(ctx, c, list, q)
		if err != nil {
			if i > 0 && meta.IsNoMatchError(err) {
				continue
			}
			return nil, err
		}
		from = append(from, watchFrom{list: list, since: since})
	}
	return from, nil
}

// listVersion returns the resource version of the list of the objects q
// asks for (one object read), for a watch to start from.
func listVersion(ctx context.Context, c client.Reader, list client.ObjectList, q Query) (string, error) {
	if err := c.List(ctx, list, client.InNamespace(q.Namespace), client.Limit(1)); err != nil {
		return "", fmt.Errorf("listing %T: %w", list, err)
	}
	return list.GetResourceVersion(), nil
}

// watchRows prints, for every object of the kinds of from that q asks for
// and that changes after the resource version each starts from, its rows
// as they are now, until ctx ends; listed is the table printed before. A
// table's rows come without a header, as kubectl's do, unless listed had
// no row; they line up with the table's columns. Rows the same as those
// last printed for their object are not printed again.
func (o *getOptions) watchRows(ctx context.Context, opts Options, c client.WithWatch, n Noun, q Query, from []watchFrom, listed *Table) error {
	shown := o.shownRows(listed)
	header := len(listed.Rows) == 0 && !o.noHeaders
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type received struct {
		event watch.Event
		ended bool
	}
	events := make(chan received)
	for _, f := range from {
		listOpts := []client.ListOption{client.InNamespace(q.Namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: f.since}}}
		if q.Selector != nil {
			listOpts = append(listOpts, client.MatchingLabelsSelector{Selector: q.Selector})
		}
		w, err := c.Watch(ctx, f.list, listOpts...)
		if err != nil {
			return fmt.Errorf("watching %s: %w", n.Name, err)
		}
		defer w.Stop()
		go func() {
			for {
				e, ok := <-w.ResultChan()
				select {
				case events <- received{event: e, ended: !ok}:
				case <-ctx.Done():
					return
				}
				if !ok {
					return
				}
			}
		}()
	}
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return nil
		case r := <-events:
			if r.ended {
				return fmt.Errorf("watching %s: the API server ended the watch", n.Name)
			}
			ev = r.event
		}
		switch ev.Type {
		case watch.Error:
			return fmt.Errorf("watching %s: %v", n.Name, apierrors.FromObject(ev.Object))
		case watch.Added, watch.Modified:
		default: // deleted, or a bookmark
			continue
		}
		obj, ok := ev.Object.(client.Object)
		if !ok || (len(q.Names) > 0 && !slices.Contains(q.Names, obj.GetName())) {
			continue
		}
		t, err := n.Read(ctx, c, Query{Namespace: obj.GetNamespace(), Names: []string{obj.GetName()}, Now: opts.Clock.Now()})
		switch {
		case ctx.Err() != nil: // interrupted while reading
			return nil
		case err != nil:
			_, _ = fmt.Fprintf(opts.ErrOut, "%v\n", err) // deleted since, most likely
			continue
		}
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		shownNow := o.shownRows(t)[key]
		if len(t.Rows) == 0 || shownNow == shown[key] {
			continue
		}
		shown[key] = shownNow
		if err := o.print(opts.Out, t, true, header); err != nil {
			return err
		}
		header = false
	}
}

// shownRows returns what o prints of t's rows, by the object each comes
// from (holds: the automation): for tables, their cells; for templates,
// what they print; else their objects, as JSON, so that -o yaml prints
// every change of an object as kubectl does.
func (o *getOptions) shownRows(t *Table) map[types.NamespacedName]string {
	shown := map[types.NamespacedName]string{}
	for _, r := range t.Rows {
		key := types.NamespacedName{Namespace: r.Namespace}
		switch obj := r.Object.(type) {
		case client.Object:
			key.Name = obj.GetName()
		case holdRecord:
			key.Name = obj.Automation
		}
		var b strings.Builder
		switch {
		case o.template != nil:
			b.WriteString(o.template.render(r.Object))
		case o.output == outputTable || o.output == outputWide:
			b.WriteString(strings.Join(r.Cells, "\x00"))
		default:
			j, err := json.Marshal(r.Object)
			if err != nil {
				j = []byte(err.Error())
			}
			b.Write(j)
		}
		b.WriteString("\n")
		shown[key] += b.String()
	}
	return shown
}
