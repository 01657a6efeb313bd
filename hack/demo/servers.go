package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/uprev-dev/uprev/hack/demo/internal/release"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// startRegistry starts the registry and pushes the first release.
func (d *demo) startRegistry(context.Context) error {
	reg, err := registry.New(d.logs)
	if err != nil {
		return err
	}
	d.reg = reg
	d.state.Registry = reg.Host()
	image, err := release.Image(firstVersion)
	if err != nil {
		return err
	}
	chart, err := release.Chart(firstVersion)
	if err != nil {
		return err
	}
	for repo, img := range map[string]v1.Image{release.AgentImage: image, release.AgentChart: chart} {
		tag, err := release.ParseRef(reg.Host() + "/" + repo + ":" + firstVersion)
		if err != nil {
			return err
		}
		if _, err := release.Push(tag, img); err != nil {
			return err
		}
	}
	return d.state.write(d.o.stateDir)
}

// startGit starts the Git server with the fleet repository:
// examples/getting-started/fleet, its placeholders replaced.
func (d *demo) startGit(context.Context) error {
	root := d.path("git")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	git, err := gitserver.New(root, d.logs, gitserver.WithAfterPush(d.gitPushed))
	if err != nil {
		return err
	}
	d.git = git
	placeholders := strings.NewReplacer(registryPlaceholder, d.reg.Host(), gitPlaceholder, git.HTTPURL(fleetRepo))
	files := map[string]string{}
	src := filepath.Join(d.o.root, "examples", "getting-started", "fleet")
	err = filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = placeholders.Replace(string(data))
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	if d.state.GitURL, err = git.CreateRepo(fleetRepo, "main", files); err != nil {
		return err
	}
	d.state.Clone = d.path("fleet")
	for _, args := range [][]string{
		{"clone", "--quiet", d.state.GitURL, d.state.Clone},
		// The person trying the demo reverts from this clone.
		{"-C", d.state.Clone, "config", "user.name", "Demo User"},
		{"-C", d.state.Clone, "config", "user.email", "demo@example.com"},
		{"-C", d.state.Clone, "config", "pull.ff", "only"},
	} {
		if err := d.run(context.Background(), "git", args...); err != nil {
			return err
		}
	}
	return d.state.write(d.o.stateDir)
}
