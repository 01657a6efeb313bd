package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/freeport"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// root is the repository root, from this package.
const root = "../.."

// TestImageRunsAsTheDeploymentWould builds the manager's image for this
// machine's platform, twice, and checks that the builds are the same to
// the digest; pushes it to the in-process registry with its SBOM; pulls it
// back, unpacks its layer, and runs /uprev from it with the arguments and
// user of config/manager's Deployment against a real kube-apiserver until
// it is ready.
func TestImageRunsAsTheDeploymentWould(t *testing.T) {
	g := NewWithT(t)
	platform := runtime.GOOS + "/" + runtime.GOARCH
	created := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	first, err := build(root, "v0.0.0-test", []string{platform}, created)
	g.Expect(err).NotTo(HaveOccurred())
	second, err := build(root, "v0.0.0-test", []string{platform}, created)
	g.Expect(err).NotTo(HaveOccurred())
	d1, err := first.index.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	d2, err := second.index.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d2).To(Equal(d1), "two builds of one commit give one image")

	reg := registry.Start(t)
	ref := reg.Image("uprev-dev/uprev") + ":v0.0.0-test"
	g.Expect(first.pushTo(ref)).To(Succeed())

	// Pulled back as a node would: the index, this platform's image.
	r, err := name.ParseReference(ref)
	g.Expect(err).NotTo(HaveOccurred())
	idx, err := remote.Index(r)
	g.Expect(err).NotTo(HaveOccurred())
	manifest, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(manifest.Manifests).To(HaveLen(1))
	g.Expect(manifest.Manifests[0].Platform.String()).To(Equal(platform))
	img, err := remote.Image(r.Context().Digest(manifest.Manifests[0].Digest.String()))
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Config.User).To(Equal("65532:65532"), "non-root, as the Deployment's runAsUser")
	g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/uprev", "run"}))
	g.Expect(cfg.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.source", "https://github.com/uprev-dev/uprev"))
	g.Expect(cfg.Created.Time.Equal(created)).To(BeTrue(), "stamped with the source's time, not the build's: %s", cfg.Created)

	// The SBOM is a referrer of the image and lists what the binary links.
	sbomDoc := referredSBOM(t, r.Context(), manifest.Manifests[0].Digest)
	g.Expect(sbomDoc.SPDXVersion).To(Equal("SPDX-2.3"))
	var modules []string
	for _, p := range sbomDoc.Packages {
		modules = append(modules, p.Name)
	}
	g.Expect(modules).To(ContainElements("github.com/uprev-dev/uprev", "k8s.io/client-go", "sigs.k8s.io/controller-runtime",
		"golang.org/x/crypto/x509roots/fallback"), "the CA bundle is compiled in")

	dir := unpack(t, img)
	out, err := exec.Command(filepath.Join(dir, "uprev"), "version").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(string(out)).To(ContainSubstring("v0.0.0-test"))
	runAsDeployment(t, dir)
}

// spdxDocument is the part of an SPDX document the test reads.
type spdxDocument struct {
	SPDXVersion string `json:"spdxVersion"`
	Packages    []struct {
		Name string `json:"name"`
	} `json:"packages"`
}

// referredSBOM returns the SPDX document that refers to digest in repo.
func referredSBOM(t *testing.T, repo name.Repository, digest v1.Hash) spdxDocument {
	t.Helper()
	referrers, err := remote.Referrers(repo.Digest(digest.String()))
	if err != nil {
		t.Fatalf("listing the referrers of the image: %v", err)
	}
	refs, err := referrers.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range refs.Manifests {
		if d.ArtifactType != string(sbomType) {
			continue
		}
		art, err := remote.Image(repo.Digest(d.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		layers, err := art.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("the SBOM artifact has %d layers: %v", len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rc.Close() }()
		var doc spdxDocument
		if err := json.NewDecoder(rc).Decode(&doc); err != nil {
			t.Fatalf("decoding the SBOM: %v", err)
		}
		return doc
	}
	t.Fatalf("no referrer of type %s among %d", sbomType, len(refs.Manifests))
	return spdxDocument{}
}

// unpack writes the image's files into a new directory that the user
// 65532 can read, and returns it.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "uprev-image-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			t.Errorf("%s is setuid or setgid", h.Name)
		}
		path := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, os.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, os.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
	}
	return dir
}

// runAsDeployment runs dir's /uprev with the arguments of
// config/manager's Deployment (its ports, storage and lease namespace
// moved to this machine), as the user 65532 when the test can switch to
// it, against a real kube-apiserver, and waits until it is ready.
func runAsDeployment(t *testing.T, dir string) {
	g := NewWithT(t)
	args := deploymentArgs(t)
	c := cluster.StartT(t)
	kc, err := c.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "kubeconfig"), kc, 0o644)).To(Succeed())
	storage := filepath.Join(dir, "data")
	g.Expect(os.Mkdir(storage, 0o755)).To(Succeed())
	health, metrics := freeport.Addr(t), freeport.Addr(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "uprev-system"}}
	k8s, err := kubernetes.NewForConfig(c.Config)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = k8s.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	args = append(args, "--storage-path="+storage, "--health-addr="+health, "--metrics-addr="+metrics,
		"--leader-election-namespace=uprev-system", "--kubeconfig="+filepath.Join(dir, "kubeconfig"))

	cmd := exec.Command(filepath.Join(dir, "uprev"), args...)
	cmd.Env = []string{"HOME=/home/nonroot"} // nothing of this machine's environment, as in a Pod
	if os.Geteuid() == 0 {
		g.Expect(os.Chown(storage, uid, uid)).To(Succeed())
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	}
	logs, err := os.Create(filepath.Join(t.TempDir(), "manager.log"))
	g.Expect(err).NotTo(HaveOccurred())
	cmd.Stdout, cmd.Stderr = logs, logs
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	readyz := func() (int, error) {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	g.Eventually(readyz).WithTimeout(time.Minute).Should(Equal(http.StatusOK), func() string {
		data, _ := os.ReadFile(logs.Name())
		return fmt.Sprintf("the manager from the image is ready; its log:\n%s", data)
	})
}

// deploymentArgs returns the manager container's arguments in
// config/manager/manager.yaml, without those runAsDeployment sets.
func deploymentArgs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := yaml.Unmarshal(data, &dep); err != nil {
		t.Fatal(err)
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name != "manager" {
			continue
		}
		var args []string
		for _, a := range c.Args {
			flag, _, _ := strings.Cut(a, "=")
			switch flag {
			case "--storage-path", "--health-addr", "--metrics-addr":
			default:
				args = append(args, a)
			}
		}
		return args
	}
	t.Fatal("config/manager/manager.yaml has no container named manager")
	return nil
}
