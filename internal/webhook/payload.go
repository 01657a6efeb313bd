package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// ErrMalformed is wrapped by every error about a payload that cannot be
// read.
var ErrMalformed = errors.New("malformed payload")

// ImagePush is an image repository a registry notification says was pushed
// to.
type ImagePush struct {
	// Registry is the registry host as go-containerregistry normalises it
	// (index.docker.io for Docker Hub); empty when the notification does not
	// name it.
	Registry string
	// Repository is the repository path within the registry, such as
	// acme/agent.
	Repository string
	// Tag is the pushed tag, empty for a push by digest.
	Tag string
}

// String returns registry/repository:tag.
func (p ImagePush) String() string {
	s := p.Repository
	if p.Registry != "" {
		s = p.Registry + "/" + s
	}
	if p.Tag != "" {
		s += ":" + p.Tag
	}
	return s
}

// Matches reports whether image, an ImageRepository's spec.image, is the
// pushed repository. A push that does not name its registry matches on the
// repository path alone.
func (p ImagePush) Matches(image string) bool {
	repo, err := name.NewRepository(image)
	if err != nil {
		return false
	}
	return repo.RepositoryStr() == p.Repository && (p.Registry == "" || repo.RegistryStr() == p.Registry)
}

// distributionEnvelope is the notification envelope of the CNCF
// distribution registry (and registries that copy it, such as zot).
type distributionEnvelope struct {
	Events *[]struct {
		Action string `json:"action"`
		Target struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
			URL        string `json:"url"`
		} `json:"target"`
		Request struct {
			Host string `json:"host"`
		} `json:"request"`
	} `json:"events"`
}

// dockerHubPush is a Docker Hub webhook.
type dockerHubPush struct {
	PushData *struct {
		Tag string `json:"tag"`
	} `json:"push_data"`
	Repository struct {
		RepoName string `json:"repo_name"`
	} `json:"repository"`
}

// harborEvent is a Harbor webhook, in either of its payload formats:
// "Default" (`type` PUSH_ARTIFACT, the event in `event_data`) or
// "CloudEvents" (`type` harbor.artifact.pushed, the event in `data`).
type harborEvent struct {
	Type      string      `json:"type"`
	EventData *harborData `json:"event_data"`
	Data      *harborData `json:"data"`
}

// harborData is what a Harbor artifact event says happened.
type harborData struct {
	Resources []struct {
		Tag         string `json:"tag"`
		ResourceURL string `json:"resource_url"`
	} `json:"resources"`
	Repository *struct {
		RepoFullName string `json:"repo_full_name"`
	} `json:"repository"`
}

// Harbor's event types of an artifact push, in its Default and CloudEvents
// payload formats.
const (
	harborPushArtifact   = "PUSH_ARTIFACT"
	harborArtifactPushed = "harbor.artifact.pushed"
)

// githubPackage is a GitHub `package` (or older `registry_package`) event.
type githubPackage struct {
	Action          string     `json:"action"`
	Package         *githubPkg `json:"package"`
	RegistryPackage *githubPkg `json:"registry_package"`
}

type githubPkg struct {
	Name        string `json:"name"`
	Namespace   string `json:"namespace"`
	PackageType string `json:"package_type"`
	Owner       struct {
		Login string `json:"login"`
	} `json:"owner"`
	Registry *struct {
		URL string `json:"url"`
	} `json:"registry"`
	PackageVersion *struct {
		PackageURL        string `json:"package_url"`
		ContainerMetadata *struct {
			Tag struct {
				Name string `json:"name"`
			} `json:"tag"`
		} `json:"container_metadata"`
	} `json:"package_version"`
}

// ParseRegistryPush reads the image pushes of a registry notification: the
// distribution/OCI notification envelope (`{"events": [...]}`, push events
// only), a Harbor webhook (Default format, `type` PUSH_ARTIFACT with
// `event_data`, or CloudEvents format, `type` harbor.artifact.pushed with
// `data`), a Docker Hub webhook (`push_data`), or a GitHub `package` event
// (X-GitHub-Event: package or registry_package; container packages
// published or updated). Events of other kinds (pulls, deletions, scans,
// GitHub pings) yield no pushes and no error; a payload that is not one of
// these formats is an error wrapping ErrMalformed.
func ParseRegistryPush(h http.Header, body []byte) ([]ImagePush, error) {
	if event := h.Get("X-GitHub-Event"); event != "" {
		switch event {
		case "package", "registry_package":
			return parseGitHubPackage(body)
		default:
			return nil, nil
		}
	}
	var envelope distributionEnvelope
	if err := json.Unmarshal(body, &envelope); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if envelope.Events != nil {
		var pushes []ImagePush
		for i, e := range *envelope.Events {
			if e.Action != "push" {
				continue
			}
			host := e.Request.Host
			if host == "" {
				if u, err := url.Parse(e.Target.URL); err == nil {
					host = u.Host
				}
			}
			p, err := imagePush(host, e.Target.Repository, e.Target.Tag)
			if err != nil {
				return nil, fmt.Errorf("%w: event %d: %w", ErrMalformed, i, err)
			}
			pushes = appendPush(pushes, p)
		}
		return pushes, nil
	}
	var harbor harborEvent
	if err := json.Unmarshal(body, &harbor); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if harbor.EventData != nil || harbor.Data != nil {
		return parseHarbor(harbor)
	}
	var hub dockerHubPush
	if err := json.Unmarshal(body, &hub); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if hub.PushData != nil {
		p, err := imagePush("docker.io", hub.Repository.RepoName, hub.PushData.Tag)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return []ImagePush{p}, nil
	}
	return nil, fmt.Errorf("%w: not a distribution notification, Harbor, Docker Hub webhook or GitHub package event", ErrMalformed)
}

// parseHarbor reads the pushes of a Harbor event. Each resource's
// resource_url (host/namespace/name:tag, or @digest for a push by digest)
// names the image; without it, the repository's repo_full_name does,
// without a registry host. The `tag` of a push by digest is the digest, which
// is no tag.
func parseHarbor(ev harborEvent) ([]ImagePush, error) {
	var data *harborData
	switch ev.Type {
	case harborPushArtifact:
		data = ev.EventData
	case harborArtifactPushed:
		data = ev.Data
	default:
		return nil, nil
	}
	if data == nil {
		return nil, fmt.Errorf("%w: Harbor %s event without its data", ErrMalformed, ev.Type)
	}
	var fullName string
	if data.Repository != nil {
		fullName = data.Repository.RepoFullName
	}
	var pushes []ImagePush
	for i, res := range data.Resources {
		tag := res.Tag
		if strings.HasPrefix(tag, "sha256:") {
			tag = ""
		}
		var (
			p   ImagePush
			err error
		)
		if res.ResourceURL != "" {
			var ref name.Reference
			ref, err = name.ParseReference(res.ResourceURL)
			if err == nil {
				p, err = imagePush(ref.Context().RegistryStr(), ref.Context().RepositoryStr(), tag)
			}
		} else {
			p, err = imagePush("", fullName, tag)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: Harbor resource %d: %w", ErrMalformed, i, err)
		}
		pushes = appendPush(pushes, p)
	}
	if len(pushes) == 0 {
		return nil, fmt.Errorf("%w: Harbor %s event without resources", ErrMalformed, ev.Type)
	}
	return pushes, nil
}

// parseGitHubPackage reads a GitHub package event.
func parseGitHubPackage(body []byte) ([]ImagePush, error) {
	var ev githubPackage
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	pkg := ev.Package
	if pkg == nil {
		pkg = ev.RegistryPackage
	}
	if pkg == nil {
		return nil, fmt.Errorf("%w: package event without a package", ErrMalformed)
	}
	if (ev.Action != "published" && ev.Action != "updated") || !strings.EqualFold(pkg.PackageType, "container") && !strings.EqualFold(pkg.PackageType, "docker") {
		return nil, nil
	}
	var tag string
	if v := pkg.PackageVersion; v != nil {
		if v.ContainerMetadata != nil {
			tag = v.ContainerMetadata.Tag.Name
		}
		if ref, err := name.ParseReference(strings.TrimSuffix(v.PackageURL, ":")); err == nil {
			p, err := imagePush(ref.Context().RegistryStr(), ref.Context().RepositoryStr(), tag)
			if err == nil {
				return []ImagePush{p}, nil
			}
		}
	}
	host := "ghcr.io"
	if pkg.Registry != nil {
		if u, err := url.Parse(pkg.Registry.URL); err == nil && u.Host != "" {
			host = u.Host
		}
	}
	owner := pkg.Owner.Login
	if owner == "" {
		owner = pkg.Namespace
	}
	p, err := imagePush(host, strings.ToLower(owner+"/"+pkg.Name), tag)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return []ImagePush{p}, nil
}

// imagePush normalises a pushed repository; host may be empty.
func imagePush(host, repository, tag string) (ImagePush, error) {
	if repository == "" {
		return ImagePush{}, errors.New("no repository")
	}
	if host == "" {
		// A path alone: validate it under a placeholder registry.
		repo, err := name.NewRepository("registry.invalid/" + repository)
		if err != nil {
			return ImagePush{}, err
		}
		return ImagePush{Repository: repo.RepositoryStr(), Tag: tag}, nil
	}
	repo, err := name.NewRepository(host + "/" + repository)
	if err != nil {
		return ImagePush{}, err
	}
	return ImagePush{Registry: repo.RegistryStr(), Repository: repo.RepositoryStr(), Tag: tag}, nil
}

func appendPush(pushes []ImagePush, p ImagePush) []ImagePush {
	for _, q := range pushes {
		if q == p {
			return pushes
		}
	}
	return append(pushes, p)
}

// GitPush is a push a Git server notification reports.
type GitPush struct {
	// Repositories are the keys (gitrepo.RepoKey) of the pushed
	// repository's URLs; a server reports several: HTTPS, SSH, web.
	Repositories []string
	// Ref is the pushed ref (refs/heads/main), empty when not reported.
	Ref string
}

// Matches reports whether repoURL (a spec.git.url) is one of the pushed
// repository's URLs, compared by gitrepo.RepoKey as the clone cache and the
// manager's own push notices compare them.
func (p GitPush) Matches(repoURL string) bool {
	return slices.Contains(p.Repositories, gitrepo.RepoKey(repoURL))
}

// gitPushEvent holds the fields of GitHub, Gitea/Forgejo and GitLab push
// events that name the repository.
type gitPushEvent struct {
	Ref        string       `json:"ref"`
	Repository *gitRepoURLs `json:"repository"`
	Project    *gitRepoURLs `json:"project"`
}

type gitRepoURLs struct {
	CloneURL   string `json:"clone_url"`
	SSHURL     string `json:"ssh_url"`
	GitURL     string `json:"git_url"`
	HTMLURL    string `json:"html_url"`
	GitHTTPURL string `json:"git_http_url"`
	GitSSHURL  string `json:"git_ssh_url"`
	HTTPURL    string `json:"http_url"`
	WebURL     string `json:"web_url"`
	Homepage   string `json:"homepage"`
}

func (u *gitRepoURLs) all() []string {
	if u == nil {
		return nil
	}
	return []string{u.CloneURL, u.SSHURL, u.GitURL, u.HTMLURL, u.GitHTTPURL, u.GitSSHURL, u.HTTPURL, u.WebURL, u.Homepage}
}

// ParseGitPush reads a push event of GitHub (X-GitHub-Event: push), Gitea
// or Forgejo (X-Gitea-Event / X-Forgejo-Event: push) or GitLab
// (X-Gitlab-Event: Push Hook or Tag Push Hook); a payload without such a
// header is read the same way. Other events (such as GitHub's ping) yield
// nil and no error; a push event that names no repository URL is an error
// wrapping ErrMalformed.
func ParseGitPush(h http.Header, body []byte) (*GitPush, error) {
	for _, header := range []string{"X-GitHub-Event", "X-Gitea-Event", "X-Forgejo-Event"} {
		if e := h.Get(header); e != "" && e != "push" {
			return nil, nil
		}
	}
	if e := h.Get("X-Gitlab-Event"); e != "" && e != "Push Hook" && e != "Tag Push Hook" {
		return nil, nil
	}
	var ev gitPushEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	push := &GitPush{Ref: ev.Ref}
	for _, u := range append(ev.Repository.all(), ev.Project.all()...) {
		if key := gitrepo.RepoKey(u); key != "" && !slices.Contains(push.Repositories, key) {
			push.Repositories = append(push.Repositories, key)
		}
	}
	if len(push.Repositories) == 0 {
		return nil, fmt.Errorf("%w: push event without a repository URL", ErrMalformed)
	}
	return push, nil
}
