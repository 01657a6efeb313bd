package controllers

import (
	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// eventMetadata is what events forwarded to notification-controller carry
// besides their message, keyed as Flux's controllers key it, so that its
// Git commit status providers find the revision: a Sync's events carry the
// revision it last fetched, an UpdateAutomation's the tip it last saw, and
// its Pushed event the commit it pushed; an ImageUpdateAutomation's the
// same, under its own API group.
func eventMetadata(obj runtime.Object, reason string) map[string]string {
	key := func(k string) string { return uprevv1.GroupVersion.Group + "/" + k }
	switch o := obj.(type) {
	case *iacv1.ImageUpdateAutomation:
		return automationMetadata(iacv1.GroupVersion.Group, reason, o.Status.ObservedSourceRevision, o.Status.LastPushCommit)
	case *uprevv1.Sync:
		if rev := o.Status.LastAttemptedRevision; rev != "" {
			return map[string]string{key(eventv1.MetaRevisionKey): rev}
		}
	case *uprevv1.UpdateAutomation:
		return automationMetadata(uprevv1.GroupVersion.Group, reason, o.Status.ObservedSourceRevision, o.Status.LastPushCommit)
	}
	return nil
}

// automationMetadata is the metadata of an automation's event: the
// revision it last saw, and on a Pushed event the commit, keyed under
// group.
func automationMetadata(group, reason, revision, commit string) map[string]string {
	md := map[string]string{}
	if revision != "" {
		md[group+"/"+eventv1.MetaRevisionKey] = revision
	}
	if reason == pushedReason && commit != "" {
		md[group+"/"+eventv1.MetaCommitKey] = commit
	}
	return md
}
