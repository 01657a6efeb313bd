package manager

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/reporoot"
)

// childBuildEnv, when set, makes the test binary a second test process
// that builds the small program of the repository into the path it names,
// as Program does.
const childBuildEnv = "UPREV_PROGRAM_CHILD_BUILD"

// smallProgram is a program of the repository that links in seconds.
const smallProgram = "./hack/demo/push-tag"

func TestMain(m *testing.M) {
	if path := os.Getenv(childBuildEnv); path != "" {
		out, err := (&program{path: path}).build(smallProgram)
		if err != nil {
			fmt.Printf("error: %v\n%s", err, out)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProgramIsSharedByTestProcesses: test processes that build the same
// program side by side each get it whole, and one that finds it built
// leaves the file alone (the same file: go build only touches it), so that
// a process running it is never disturbed and no link is repeated.
func TestProgramIsSharedByTestProcesses(t *testing.T) {
	g := NewWithT(t)
	name := "push-tag-" + strconv.Itoa(os.Getpid())
	path := filepath.Join(reporoot.Dir(), "bin", "test", name)
	t.Cleanup(func() { _ = os.Remove(path); _ = os.Remove(path + ".lock") })

	children := make([]*exec.Cmd, 2)
	for i := range children {
		children[i] = exec.Command(os.Args[0])
		children[i].Env = append(os.Environ(), childBuildEnv+"="+path)
		g.Expect(children[i].Start()).To(Succeed())
	}
	for _, c := range children {
		g.Expect(c.Wait()).To(Succeed(), "a process building %s beside another", smallProgram)
	}
	usage, err := exec.Command(path).CombinedOutput()
	g.Expect(err).To(HaveOccurred(), "push-tag without arguments exits 2")
	g.Expect(string(usage)).To(ContainSubstring("usage: go run ./hack/demo/push-tag"), "the program built whole")

	before := inode(t, path)
	g.Expect(Program(t, smallProgram, name)).To(Equal(path))
	g.Expect(inode(t, path)).To(Equal(before), "a program already built is left alone")
}

// inode returns the inode number of path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Ino
}
