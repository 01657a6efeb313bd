package apply

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// maxComponents bounds the components in these tests.
const maxComponents = 128

// digestA and digestB are two image digests.
const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestParseImage(t *testing.T) {
	for _, tc := range []struct {
		ref     string
		want    Component
		wantErr bool
	}{
		{ref: "ghcr.io/acme/agent:1.4.2", want: Component{Image: "ghcr.io/acme/agent", Tag: "1.4.2"}},
		{ref: "ghcr.io/acme/agent:1.4.2@" + digestA, want: Component{Image: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: digestA}},
		{ref: "ghcr.io/acme/agent@" + digestA, want: Component{Image: "ghcr.io/acme/agent", Digest: digestA}},
		{ref: "localhost:5000/agent:v1", want: Component{Image: "localhost:5000/agent", Tag: "v1"}},
		{ref: "localhost:5000/agent", want: Component{Image: "localhost:5000/agent"}},
		{ref: "redis", want: Component{Image: "redis"}},
		{ref: "Not A Reference", wantErr: true},
		{ref: "ghcr.io/acme/agent@sha256:short", wantErr: true},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseImage(tc.ref)
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// manifest parses the YAML of one object.
func manifest(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	o := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &o.Object); err != nil {
		t.Fatalf("parsing %s: %v", manifest, err)
	}
	return o
}

func TestAppliedComponentsOfPodTemplates(t *testing.T) {
	g := NewWithT(t)
	objects := []*unstructured.Unstructured{
		manifest(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: agent},
		  spec: {template: {spec: {
		    initContainers: [{name: crds, image: "ghcr.io/acme/agent-crds:1.4.2"}],
		    containers: [{name: agent, image: "ghcr.io/acme/agent:1.4.2@`+digestA+`"}, {name: proxy, image: "envoyproxy/envoy:v1.30.1"}]}}}}`),
		manifest(t, `{apiVersion: apps/v1, kind: StatefulSet, metadata: {name: db},
		  spec: {template: {spec: {containers: [{name: db, image: "postgres:16.2"}]}}}}`),
		manifest(t, `{apiVersion: batch/v1, kind: CronJob, metadata: {name: backup},
		  spec: {jobTemplate: {spec: {template: {spec: {containers: [{name: backup, image: "postgres:16.2"}]}}}}}}`),
		manifest(t, `{apiVersion: v1, kind: Pod, metadata: {name: debug},
		  spec: {containers: [{name: shell, image: "busybox@`+digestB+`"}]}}`),
		manifest(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: settings}, data: {image: "not/a:container"}}`),
		manifest(t, `{apiVersion: apps/v1, kind: DaemonSet, metadata: {name: broken},
		  spec: {template: {spec: {containers: [{name: bad, image: "Not A Reference"}, {name: empty}]}}}}`),
	}
	components, omitted := AppliedComponents(objects, Result{}, "default", maxComponents)
	g.Expect(omitted).To(BeZero())
	g.Expect(components).To(Equal([]Component{
		{Image: "busybox", Digest: digestB},
		{Image: "envoyproxy/envoy", Tag: "v1.30.1"},
		{Image: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: digestA},
		{Image: "ghcr.io/acme/agent-crds", Tag: "1.4.2"},
		{Image: "postgres", Tag: "16.2"},
	}), "sorted, each once, invalid references left out")
}

func TestAppliedComponentsAreBounded(t *testing.T) {
	g := NewWithT(t)
	var objects []*unstructured.Unstructured
	for i := range maxComponents + 3 {
		objects = append(objects, manifest(t, fmt.Sprintf(`{apiVersion: apps/v1, kind: Deployment, metadata: {name: app-%[1]d},
		  spec: {template: {spec: {containers: [{name: app, image: "ghcr.io/acme/app-%03[1]d:1.0.0"}]}}}}`, i)))
	}
	components, omitted := AppliedComponents(objects, Result{}, "default", maxComponents)
	g.Expect(components).To(HaveLen(maxComponents))
	g.Expect(omitted).To(Equal(3))
	g.Expect(components[0].Image).To(Equal("ghcr.io/acme/app-000"))
}
