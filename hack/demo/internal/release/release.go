// Package release builds the demo's releases, an agent image and the
// agent's Helm chart that ships its CRDs, and pushes them to a registry.
// `make demo` pushes the first release; hack/demo/push-tag pushes the next
// ones.
package release

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// Repositories of the demo registry that its policies follow.
const (
	// AgentImage is the agent's container image.
	AgentImage = "acme/agent"
	// AgentChart is the agent's Helm chart, which ships its CRDs.
	AgentChart = "charts/agent"
)

// CRDName is the CRD the agent's chart ships.
const CRDName = "agents.acme.example.com"

// Image returns the agent's container image of version: one layer with the
// agent's "binary", whose content names the version, so every version has
// its own digest.
func Image(version string) (v1.Image, error) {
	img, err := crane.Image(map[string][]byte{
		"usr/local/bin/agent": []byte("#!/bin/sh\necho agent " + version + "\n"),
	})
	if err != nil {
		return nil, fmt.Errorf("building the agent image %s: %w", version, err)
	}
	return img, nil
}

// Chart returns the agent's Helm chart of version, whose crds/ folder holds
// the Agent CRD labelled with that version: every chart release changes the
// CRD.
func Chart(version string) (v1.Image, error) {
	img, err := registry.NewHelmChart("agent", version, map[string]string{"crds/agents.yaml": agentCRD(version)})
	if err != nil {
		return nil, fmt.Errorf("building the agent chart %s: %w", version, err)
	}
	return img, nil
}

// agentCRD is the Agent CRD as chart version ships it.
func agentCRD(version string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %s
  labels:
    app.kubernetes.io/version: %q
spec:
  group: acme.example.com
  names:
    kind: Agent
    listKind: AgentList
    plural: agents
    singular: agent
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: An agent's configuration, as of chart %s.
        x-kubernetes-preserve-unknown-fields: true
`, CRDName, version, version)
}

// ParseRef reads ref, host:port/repository:tag, as a tag of a registry
// reached over plain HTTP when it is on localhost.
func ParseRef(ref string) (name.Tag, error) {
	tag, err := name.NewTag(ref, name.StrictValidation, name.Insecure)
	if err != nil {
		return name.Tag{}, fmt.Errorf("parsing %s (want HOST:PORT/REPOSITORY:TAG): %w", ref, err)
	}
	return tag, nil
}

// Push pushes img as tag and returns its digest.
func Push(tag name.Tag, img v1.Image) (string, error) {
	if err := remote.Write(tag, img); err != nil {
		return "", fmt.Errorf("pushing %s: %w", tag, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("computing the digest of %s: %w", tag, err)
	}
	return digest.String(), nil
}
