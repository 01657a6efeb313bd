// Package demo runs `make demo` end to end: it starts the demo program
// (hack/demo) as make does, reads the script of things to try from its
// output, runs every command of it as a person would, checks what each step
// did (a commit, the waves reaching eu-1 then us-1, a hold after a revert,
// its release, new CRDs), and stops the demo as `make demo-down` does,
// checking that nothing it started is left running.
package demo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/syncbuf"
)

// root is the repository root, from this package.
const root = "../.."

// Lines of the demo's output that frame the script (hack/demo/print.go).
const (
	scriptHeader = "Things to try, from the repository root"
	scriptFooter = "Stop the demo with `make demo-down`"
)

// pause is the Sync's pauseBetweenWaves
// (examples/getting-started/fleet/management/sync.yaml).
const pause = 10 * time.Second

// step is one numbered step of the printed script.
type step struct {
	number   int
	title    string
	commands []string
}

// checks are what the test knows of each step, by number: how many
// commands it has, and what to check after running them. A step the
// script has and the test does not, or the other way round, fails.
var checks = map[int]struct {
	commands int
	check    func(t *testing.T, d *demo)
}{
	1: {1, checkPushTag},
	2: {1, checkCommit},
	3: {4, checkWaves},
	4: {3, checkRevertHolds},
	5: {1, checkReleaseHold},
	6: {3, checkChartCRDs},
}

func TestDemo(t *testing.T) {
	g := NewWithT(t)
	began := time.Now()
	for _, bin := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(cluster.AssetsDir(), bin)); err != nil {
			t.Fatalf("%s is missing in %s: run `make controlplane`, or set KUBEBUILDER_ASSETS", bin, cluster.AssetsDir())
		}
	}
	d := startDemo(t)
	steps := d.script(t)
	t.Logf("%4.0fs: the demo is up", time.Since(began).Seconds())
	numbers := make([]int, 0, len(steps))
	for _, s := range steps {
		numbers = append(numbers, s.number)
	}
	g.Expect(numbers).To(HaveLen(len(checks)), "the script's steps and the test's checks")
	for _, s := range steps {
		c, ok := checks[s.number]
		g.Expect(ok).To(BeTrue(), "step %d has no check", s.number)
		g.Expect(s.commands).To(HaveLen(c.commands), "step %d: %s", s.number, s.title)
	}
	d.steps = map[int]step{}
	for _, s := range steps {
		d.steps[s.number] = s
	}
	for _, s := range steps {
		t.Logf("%4.0fs: step %d: %s", time.Since(began).Seconds(), s.number, s.title)
		checks[s.number].check(t, d)
	}
	t.Logf("%4.0fs: stopping the demo", time.Since(began).Seconds())
	d.stop(t)
	t.Logf("%4.0fs: stopped", time.Since(began).Seconds())
}

// demo is the running demo program.
type demo struct {
	cmd      *exec.Cmd
	bin      string
	stateDir string
	out      *syncbuf.Buffer
	done     chan struct{}
	// state is the demo's state.json once it is up.
	state struct {
		Registry    string            `json:"registry"`
		Clone       string            `json:"clone"`
		KubeConfigs map[string]string `json:"kubeconfigs"`
		Processes   []struct {
			PID  int    `json:"pid"`
			Name string `json:"name"`
		} `json:"processes"`
		ManagerLog string `json:"managerLog"`
	}
	steps   map[int]step
	stopped bool
	// uprev is the uprev binary the demo runs.
	uprev string
}

// startDemo builds bin/uprev and the demo program as make demo does, and
// starts the demo with its state in a temporary directory.
func startDemo(t *testing.T) *demo {
	t.Helper()
	uprev := manager.Build(t)
	bin := manager.Program(t, "./hack/demo", "uprev-demo")
	d := &demo{uprev: uprev, bin: bin, stateDir: filepath.Join(t.TempDir(), "state"), out: &syncbuf.Buffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(bin, "up", "--state-dir", d.stateDir, "--uprev", uprev)
	d.cmd.Dir = root
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting the demo: %v", err)
	}
	go func() {
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			if d.state.ManagerLog != "" {
				if logs, err := os.ReadFile(d.state.ManagerLog); err == nil {
					t.Logf("manager log:\n%s", logs)
				}
			}
			t.Logf("demo output:\n%s", d.out.String())
		}
		d.stop(t)
	})
	return d
}

// script waits until the demo is up and returns the steps of the script
// it printed, which must be what it wrote into its state directory.
func (d *demo) script(t *testing.T) []step {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		select {
		case <-d.done:
			StopTrying("the demo exited before it was up").Now()
		default:
		}
		g.Expect(d.out.String()).To(ContainSubstring(scriptFooter))
	}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
	data, err := os.ReadFile(filepath.Join(d.stateDir, "state.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &d.state)).To(Succeed())

	out := d.out.String()
	start := strings.Index(out, scriptHeader)
	g.Expect(start).To(BeNumerically(">=", 0))
	printed := out[start:strings.Index(out, scriptFooter)]
	printed = printed[strings.Index(printed, "\n")+1:]
	written, err := os.ReadFile(filepath.Join(d.stateDir, "script.sh"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(printed)).To(Equal(strings.TrimSpace(string(written))), "the printed script is script.sh")
	return parseScript(t, printed)
}

// stepHeader is a step's first line: `# <number>. <title>`.
var stepHeader = regexp.MustCompile(`^# (\d+)\. (.+)$`)

// parseScript reads the steps of a script: each starts with its header;
// its commands are the lines up to the next header that are neither empty
// nor comments.
func parseScript(t *testing.T, script string) []step {
	t.Helper()
	var steps []step
	sc := bufio.NewScanner(strings.NewReader(script))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := stepHeader.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			steps = append(steps, step{number: n, title: m[2]})
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(steps) == 0 {
			t.Fatalf("the script has a command before its first step: %s", line)
		}
		steps[len(steps)-1].commands = append(steps[len(steps)-1].commands, line)
	}
	return steps
}

// run runs a command of the script with sh from the repository root, as a
// person would paste it, and returns its output; it fails the test when
// the command fails.
func (d *demo) run(t *testing.T, command string) string {
	t.Helper()
	out, err := runCommand(command)
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	return out
}

// runCommand runs command with sh from the repository root. Git reads no
// user or system configuration, as on a fresh machine.
func runCommand(command string) (string, error) {
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// command returns command i of step n.
func (d *demo) command(n, i int) string {
	return d.steps[n].commands[i]
}

// eventually runs command i of step n until its output satisfies matcher.
func (d *demo) eventually(t *testing.T, n, i int, matcher OmegaMatcher) string {
	t.Helper()
	var out string
	NewWithT(t).Eventually(func(g Gomega) {
		var err error
		out, err = runCommand(d.command(n, i))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(matcher)
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "step %d: %s", n, d.command(n, i))
	return out
}

// image returns the agent's image ref of tag in the demo registry, without
// its digest.
func (d *demo) image(tag string) string {
	return d.state.Registry + "/acme/agent:" + tag + "@sha256:"
}

// checkPushTag: the tag is pushed.
func checkPushTag(t *testing.T, d *demo) {
	out := d.run(t, d.command(1, 0))
	NewWithT(t).Expect(out).To(HavePrefix("pushed " + d.image("1.1.0")))
}

// checkCommit: uprev commits the new version.
func checkCommit(t *testing.T, d *demo) {
	d.eventually(t, 2, 0, MatchRegexp(`^[0-9a-f]+ Update agent to 1\.1\.0\n`))
}

// checkWaves: eu-1 gets the new image, then us-1, at least the pause
// later, both at the commit of step 2.
func checkWaves(t *testing.T, d *demo) {
	g := NewWithT(t)
	d.eventually(t, 3, 0, HavePrefix(d.image("1.1.0")))
	d.eventually(t, 3, 1, HavePrefix(d.image("1.1.0")))
	head := strings.TrimSpace(d.run(t, "git -C "+d.state.Clone+" rev-parse HEAD"))
	out := d.eventually(t, 3, 2, ContainSubstring("us-1\tmain@sha1:"+head))
	applied := map[string]time.Time{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Split(line, "\t")
		g.Expect(fields).To(HaveLen(3), line)
		g.Expect(fields[1]).To(Equal("main@sha1:"+head), line)
		at, err := time.Parse(time.RFC3339, fields[2])
		g.Expect(err).NotTo(HaveOccurred())
		applied[fields[0]] = at
	}
	g.Expect(applied).To(HaveKey("eu-1"))
	g.Expect(applied["us-1"].Sub(applied["eu-1"])).To(BeNumerically(">=", pause), "us-1 gets the revision the pause after eu-1")
	d.eventually(t, 3, 3, MatchRegexp(`(?m)^COMPONENT +LATEST +eu-1 +us-1\nagent +1\.1\.0 +1\.1\.0 +1\.1\.0\n`))
}

// checkRevertHolds: the revert rolls the clusters back, and the
// automation holds the reverted version instead of writing it again.
func checkRevertHolds(t *testing.T, d *demo) {
	g := NewWithT(t)
	d.run(t, d.command(4, 0))
	out := d.eventually(t, 4, 1, ContainSubstring(`"version":"1.1.0"`))
	var holds []struct{ Policy, Version, RevertedIn string }
	g.Expect(json.Unmarshal([]byte(out), &holds)).To(Succeed())
	g.Expect(holds).To(ConsistOf(HaveField("Policy", "uprev-system/agent")))
	revert := strings.TrimSpace(d.run(t, "git -C "+d.state.Clone+" rev-parse HEAD"))
	g.Expect(holds[0].RevertedIn).To(Equal(revert))
	g.Expect(d.run(t, d.command(2, 0))).To(MatchRegexp(`^[0-9a-f]+ Revert "Update agent to 1\.1\.0"\n`), "no new commit of the held version")
	d.eventually(t, 3, 0, HavePrefix(d.image("1.0.0")))
	d.eventually(t, 4, 2, MatchRegexp(`(?m)^agent +1\.1\.0 \(held\) +1\.0\.0 \(held\) +1\.0\.0 \(held\)\n`))
}

// checkReleaseHold: released, the version is written again and the hold
// is gone.
func checkReleaseHold(t *testing.T, d *demo) {
	d.run(t, d.command(5, 0))
	d.eventually(t, 2, 0, MatchRegexp(`^[0-9a-f]+ Update agent to 1\.1\.0\n[0-9a-f]+ Revert "Update agent to 1\.1\.0"\n`))
	d.eventually(t, 4, 1, Equal("\n"))
	d.eventually(t, 3, 0, HavePrefix(d.image("1.1.0")))
}

// checkChartCRDs: a new chart's CRDs are committed and applied.
func checkChartCRDs(t *testing.T, d *demo) {
	out := d.run(t, d.command(6, 0))
	NewWithT(t).Expect(out).To(HavePrefix("pushed " + d.state.Registry + "/charts/agent:1.1.0@sha256:"))
	d.eventually(t, 6, 1, And(
		ContainSubstring("crds: agents.acme.example.com 1.0.0 --> 1.1.0"),
		ContainSubstring("apps/agent/crds/agents.acme.example.com.yaml"),
	))
	d.eventually(t, 6, 2, Equal("1.1.0\n"))
}

// stop stops the demo as `make demo-down` does and checks that the demo
// exited, that no process it started is left, and that its state is gone.
func (d *demo) stop(t *testing.T) {
	t.Helper()
	if d.stopped {
		return
	}
	d.stopped = true
	g := NewWithT(t)
	var recorded []int
	for _, p := range d.state.Processes {
		recorded = append(recorded, p.PID)
	}
	down := exec.Command(d.bin, "down", "--state-dir", d.stateDir)
	down.Dir = root
	out, err := down.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("The demo is down."))
	g.Eventually(d.done).WithTimeout(time.Minute).Should(BeClosed())
	if !t.Failed() {
		g.Expect(d.cmd.ProcessState.ExitCode()).To(BeZero(), "the demo exits cleanly when signalled")
	}
	g.Expect(d.stateDir).NotTo(BeADirectory())
	if _, err := os.Stat("/proc/self"); err != nil || t.Failed() {
		return // no /proc: the demo records no processes
	}
	g.Expect(d.state.Processes).To(HaveLen(7), "etcd and kube-apiserver of three control planes, and the manager")
	for _, pid := range recorded {
		g.Expect(alive(pid)).To(BeFalse(), "process %d is left running", pid)
	}
	g.Expect(processesMentioning(d.stateDir)).To(BeEmpty(), "processes whose command line names the demo's state directory")
}

// alive reports whether process pid runs and is no zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	end := bytes.LastIndexByte(stat, ')')
	return end < 0 || len(stat) < end+3 || (stat[end+2] != 'Z' && stat[end+2] != 'X')
}

// processesMentioning returns the live processes whose command line holds
// s.
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found
}
