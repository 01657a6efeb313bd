package monitoring

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/uprev-dev/uprev/internal/testenv/reporoot"
)

// serviceMonitor is the part of a Prometheus Operator ServiceMonitor that
// decides what it scrapes.
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port            string `json:"port"`
			Scheme          string `json:"scheme"`
			BearerTokenFile string `json:"bearerTokenFile"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// TestServiceMonitorScrapesTheManager reads config/monitoring's
// ServiceMonitor and the manager's metrics Service and fails unless the
// monitor selects that Service, in its namespace, on its port, over HTTPS
// with a bearer token (the metrics answer 401 without one).
func TestServiceMonitorScrapesTheManager(t *testing.T) {
	var sm serviceMonitor
	readYAML(t, filepath.Join(reporoot.Dir(), "config", "monitoring", "servicemonitor.yaml"), &sm)
	var svc corev1.Service
	readYAML(t, filepath.Join(reporoot.Dir(), "config", "manager", "metrics_service.yaml"), &svc)

	if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Kind != "ServiceMonitor" {
		t.Fatalf("not a ServiceMonitor: %s %s", sm.APIVersion, sm.Kind)
	}
	if len(sm.Spec.Selector.MatchLabels) == 0 {
		t.Fatal("the ServiceMonitor selects every Service: it has no matchLabels")
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which the Service %s (labels %v) does not carry", k, v, svc.Name, svc.Labels)
		}
	}
	namespaces := append([]string{sm.Metadata.Namespace}, sm.Spec.NamespaceSelector.MatchNames...)
	found := false
	for _, ns := range namespaces {
		found = found || ns == svc.Namespace
	}
	if !found {
		t.Errorf("the ServiceMonitor looks in %v, the Service is in %s", namespaces, svc.Namespace)
	}
	if len(sm.Spec.Endpoints) == 0 {
		t.Fatal("the ServiceMonitor has no endpoint")
	}
	ports := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name] = true
	}
	for _, e := range sm.Spec.Endpoints {
		if !ports[e.Port] {
			t.Errorf("endpoint port %q is not a port of the Service (%v)", e.Port, ports)
		}
		if e.Scheme != "https" || e.BearerTokenFile == "" {
			t.Errorf("endpoint %q scrapes with scheme %q and token file %q; the manager serves its metrics over HTTPS to authorized bearers only", e.Port, e.Scheme, e.BearerTokenFile)
		}
	}
}

// readYAML decodes the YAML file at path into v (fields v does not have
// are ignored).
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
