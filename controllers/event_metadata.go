package controllers

import (
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// eventMetadata is what events forwarded to notification-controller carry
// besides their message, keyed as Flux's controllers key it, so that its
// Git commit status providers find the revision: a Sync's events carry the
// revision it last fetched, an UpdateAutomation's the tip it last saw, and
// its Pushed event the commit it pushed.
func eventMetadata(obj runtime.Object, reason string) map[string]string {
	key := func(k string) string { return uprevv1.GroupVersion.Group + "/" + k }
	switch o := obj.(type) {
	case *uprevv1.Sync:
		if rev := o.Status.LastAttemptedRevision; rev != "" {
			return map[string]string{key(eventv1.MetaRevisionKey): rev}
		}
	case *uprevv1.UpdateAutomation:
		md := map[string]string{}
		if rev := o.Status.ObservedSourceRevision; rev != "" {
			md[key(eventv1.MetaRevisionKey)] = rev
		}
		if reason == pushedReason && o.Status.LastPushCommit != "" {
			md[key(eventv1.MetaCommitKey)] = o.Status.LastPushCommit
		}
		return md
	}
	return nil
}
