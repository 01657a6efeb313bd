package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/webhook"
)

// fleetRepo is the name of every scenario's Git repository.
const fleetRepo = "fleet"

// Placeholders of the examples, as in examples/getting-started.
const (
	registryPlaceholder = "registry.example.com"
	gitPlaceholder      = "http://git.example.com/fleet.git"
)

// examplesDir is the examples folder, from this package.
const examplesDir = "../../examples"

// scenario is what one test runs against: its own namespace in the cluster
// uprev runs in, its own OCI registry and Git server, and the renames that
// turn an example's placeholders and namespaces into them.
type scenario struct {
	t   testing.TB
	ns  string
	reg *registry.Registry
	git *gitserver.Server
	// url is the Git URL of fleetRepo, once initRepo made it.
	url     string
	renames []string
}

// newScenario creates a namespace named after prefix, a registry and a Git
// server. When the test ends, the uprev objects of the namespace are
// deleted before the servers stop, so that nothing keeps reconciling
// against servers that are gone.
func newScenario(t testing.TB, prefix string, gitOpts ...gitserver.Option) *scenario {
	t.Helper()
	s := &scenario{t: t, ns: newNamespace(t, prefix), reg: registry.Start(t), git: gitserver.Start(t, gitOpts...)}
	s.rename(registryPlaceholder, s.reg.Host())
	t.Cleanup(func() { deleteUprevObjects(s.ns) })
	return s
}

// newNamespace creates a namespace named prefix-<random> for one test.
func newNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// deleteUprevObjects deletes every uprev object of namespace ns.
func deleteUprevObjects(ns string) {
	ctx := context.Background()
	for _, obj := range []client.Object{&uprevv1.Sync{}, &uprevv1.UpdateAutomation{}, &uprevv1.ReleaseGate{}, &uprevv1.ReleaseSource{}, &imagev1.ImagePolicy{}, &imagev1.ImageRepository{}} {
		_ = k8s.DeleteAllOf(ctx, obj, client.InNamespace(ns))
	}
}

// rename makes every later replace turn old into new.
func (s *scenario) rename(old, new string) {
	s.renames = append(s.renames, old, new)
}

// replace applies the renames to text.
func (s *scenario) replace(text string) string {
	return strings.NewReplacer(s.renames...).Replace(text)
}

// initRepo creates fleetRepo with files on branch main, and renames the
// Git placeholder to its URL.
func (s *scenario) initRepo(files map[string]string) {
	s.t.Helper()
	s.url = s.git.InitRepo(s.t, fleetRepo, "main", files)
	s.rename(gitPlaceholder, s.url)
}

// exampleFleet returns the files of examples/<name>/fleet, renamed, as the
// content of a Git repository.
func (s *scenario) exampleFleet(name string) map[string]string {
	s.t.Helper()
	files := map[string]string{}
	root := filepath.Join(examplesDir, name, "fleet")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = s.replace(string(data))
		return err
	})
	if err != nil {
		s.t.Fatalf("reading the example repository %s: %v", root, err)
	}
	return files
}

// exampleFile returns examples/<name>/<file>, renamed.
func (s *scenario) exampleFile(name, file string) string {
	s.t.Helper()
	data, err := os.ReadFile(filepath.Join(examplesDir, name, file))
	if err != nil {
		s.t.Fatalf("reading the example: %v", err)
	}
	return s.replace(string(data))
}

// exampleObjects decodes the uprev objects of the YAML files at the top of
// examples/<name>, renamed, in file order; documents of other kinds fail
// the test.
func (s *scenario) exampleObjects(name string) []client.Object {
	s.t.Helper()
	paths, err := filepath.Glob(filepath.Join(examplesDir, name, "*.yaml"))
	if err != nil || len(paths) == 0 {
		s.t.Fatalf("no manifests in examples/%s (%v)", name, err)
	}
	sort.Strings(paths)
	var objs []client.Object
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			s.t.Fatal(err)
		}
		docs := yaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s.replace(string(data)))))
		for {
			doc, err := docs.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				s.t.Fatalf("reading %s: %v", path, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			objs = append(objs, decodeUprevObject(s.t, path, doc))
		}
	}
	return objs
}

// decodeUprevObject decodes one document of an example into its Go type,
// refusing unknown fields.
func decodeUprevObject(t testing.TB, path string, doc []byte) client.Object {
	t.Helper()
	var head struct{ Kind string }
	if err := sigsyaml.Unmarshal(doc, &head); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	var obj client.Object
	switch head.Kind {
	case "ImageRepository":
		obj = &imagev1.ImageRepository{}
	case "ImagePolicy":
		obj = &imagev1.ImagePolicy{}
	case "UpdateAutomation":
		obj = &uprevv1.UpdateAutomation{}
	case "Sync":
		obj = &uprevv1.Sync{}
	case "ReleaseGate":
		obj = &uprevv1.ReleaseGate{}
	case "ReleaseSource":
		obj = &uprevv1.ReleaseSource{}
	default:
		t.Fatalf("%s: kind %q is not one of uprev's", path, head.Kind)
	}
	if err := sigsyaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return obj
}

// object returns the example object of type T named name.
func object[T client.Object](t testing.TB, objs []client.Object, name string) T {
	t.Helper()
	for _, o := range objs {
		if typed, ok := o.(T); ok && o.GetName() == name {
			return typed
		}
	}
	var zero T
	t.Fatalf("the example has no %T named %s", zero, name)
	return zero
}

// create creates objs in the cluster uprev runs in.
func create(t testing.TB, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// log returns the history of branch, newest first.
func (s *scenario) log(branch string) []gitserver.Commit {
	s.t.Helper()
	return s.git.Log(s.t, fleetRepo, branch)
}

// subjects returns the subjects of the history of branch, newest first.
func (s *scenario) subjects(branch string) []string {
	s.t.Helper()
	var subjects []string
	for _, c := range s.log(branch) {
		subjects = append(subjects, c.Subject)
	}
	return subjects
}

// tip returns the SHA of the tip of branch.
func (s *scenario) tip(branch string) string {
	s.t.Helper()
	return s.git.Git(s.t, fleetRepo, "rev-parse", "refs/heads/"+branch)
}

// message returns the whole message of commit sha.
func (s *scenario) message(sha string) string {
	s.t.Helper()
	return s.git.Git(s.t, fleetRepo, "log", "-1", "--format=%B", sha)
}

// changedFiles returns the paths commit sha changed.
func (s *scenario) changedFiles(sha string) []string {
	s.t.Helper()
	return strings.Fields(s.git.Git(s.t, fleetRepo, "show", "--name-only", "--format=", sha))
}

// readFile returns path at the tip of branch.
func (s *scenario) readFile(branch, path string) string {
	s.t.Helper()
	return s.git.ReadFile(s.t, fleetRepo, branch, path)
}

// kubeConfigSecret creates the Secret of a remote target in the
// scenario's namespace.
func (s *scenario) kubeConfigSecret(name string, rc *remoteCluster) {
	s.t.Helper()
	create(s.t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Data:       map[string][]byte{"value": rc.kubeConfig},
	})
}

// webhookToken creates the Secret that turns on the webhook receivers of
// the scenario's namespace and returns its token.
func (s *scenario) webhookToken() string {
	s.t.Helper()
	buf := make([]byte, 32)
	_, _ = rand.Read(buf)
	token := hex.EncodeToString(buf)
	create(s.t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: webhook.DefaultSecretName},
		Data:       map[string][]byte{webhook.TokenKey: []byte(token)},
	})
	return token
}

// notifyRegistryPush posts the notification a CNCF distribution registry
// sends for a push of repo:tag to the registry receiver of the scenario's
// namespace, and returns the objects it triggered. It retries until the
// receiver accepts it (the manager's cache may not hold the Secret yet).
func (s *scenario) notifyRegistryPush(token, repo, tag string) []string {
	s.t.Helper()
	body := fmt.Sprintf(`{"events":[{"action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":%q,"tag":%q,"url":"http://%s/v2/%s/manifests/%s"},"request":{"host":%q}}]}`,
		repo, tag, s.reg.Host(), repo, tag, s.reg.Host())
	return s.notify(token, webhook.KindRegistry, nil, body)
}

// notifyGitPush posts the push event GitHub sends for a push to branch of
// the scenario's repository to the Git receiver, and returns the objects
// it triggered.
func (s *scenario) notifyGitPush(token, branch string) []string {
	s.t.Helper()
	body := fmt.Sprintf(`{"ref":"refs/heads/%s","repository":{"clone_url":%q}}`, branch, s.url)
	return s.notify(token, webhook.KindGit, http.Header{"X-GitHub-Event": {"push"}}, body)
}

func (s *scenario) notify(token, kind string, header http.Header, body string) []string {
	s.t.Helper()
	var triggered webhook.Triggered
	NewWithT(s.t).Eventually(func(g Gomega) {
		req, err := http.NewRequest(http.MethodPost, webhookURL+webhook.PathPrefix+kind+"/"+s.ns, strings.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		for k, v := range header {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		answer, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted), "%s", answer)
		g.Expect(json.Unmarshal(answer, &triggered)).To(Succeed())
	}).Should(Succeed())
	return triggered.Objects
}

// agentDeployment is clusters/prod/agent.yaml of examples/review-branch:
// the agent's Deployment at 1.4.1 of image, marked for the policy agent of
// namespace ns.
func agentDeployment(image, ns string) string {
	return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: agent\nspec:\n  template:\n    spec:\n      containers:\n        - name: agent\n          image: %s:1.4.1 # {\"$imagepolicy\": \"%s:agent\"}\n", image, ns)
}

// createAgentPolicy creates the ImageRepository and the ImagePolicy agent
// (semver >=1.0.0, digests reflected) of image in namespace ns, which the
// review-branch example's automation writes.
func createAgentPolicy(t testing.TB, ns, image string) {
	t.Helper()
	create(t,
		&imagev1.ImageRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			Spec:       imagev1.ImageRepositorySpec{Image: image, Interval: metav1.Duration{Duration: time.Hour}},
		},
		&imagev1.ImagePolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			Spec: imagev1.ImagePolicySpec{
				ImageRepositoryRef:     meta.NamespacedObjectReference{Name: "agent"},
				Policy:                 imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
				DigestReflectionPolicy: imagev1.ReflectIfNotPresent,
			},
		})
}
