package reporoot

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDirIsTheRepositoryRootFromAPackageDirectory(t *testing.T) {
	// go test runs this in internal/testenv/reporoot.
	want, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if got := Dir(); got != want {
		t.Fatalf("Dir() = %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(Dir(), "config", "crd")); err != nil {
		t.Fatalf("the root has no config/crd: %v", err)
	}
}

func TestANestedModuleIsNotTheRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module github.com/uprev-dev/uprev/hack/lint\n\ngo 1.26\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if declaresModule(filepath.Join(dir, "go.mod")) {
		t.Fatal("a nested module was taken for uprev's")
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("// uprev\nmodule github.com/uprev-dev/uprev\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !declaresModule(filepath.Join(dir, "go.mod")) {
		t.Fatal("uprev's go.mod was not recognised")
	}
}
