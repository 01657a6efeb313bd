package demo

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/syncbuf"
)

// screenshots is where TestDashboard writes its screenshots for
// docs/fleet.md: `go test ./test/demo -run TestDashboard -screenshots
// $PWD/docs/images`.
var screenshots = flag.String("screenshots", "", "write the dashboard's screenshots into this directory")

// browser is the headless browser the dashboard is tested in: Debian's
// chromium package.
const browser = "chromium"

// The demo's objects the dashboard shows (examples/getting-started).
const (
	agentRow = `[data-component="uprev-system/agent"]`
	eu1Cell  = `td.cell` + agentRow + `[data-target="uprev-system/agent/eu-1"]`
	us1Cell  = `td.cell` + agentRow + `[data-target="uprev-system/agent/us-1"]`
)

// TestDashboard opens `uprev dashboard` on the demo fleet in a headless
// Chromium: the matrix shows the version each cluster runs; a pushed tag
// reaches eu-1, waits there for the pause while us-1's cell shows it
// waiting, then turns us-1's cell current, all without a reload; a revert
// shows the hold and the command that releases it.
func TestDashboard(t *testing.T) {
	g := NewWithT(t)
	chromium, err := exec.LookPath(browser)
	if err != nil {
		t.Fatalf("%s is missing, the dashboard's test needs it: install chromium: apt-get install -y chromium", browser)
	}
	d := startDemo(t)
	steps := d.script(t)
	d.steps = map[int]step{}
	for _, s := range steps {
		d.steps[s.number] = s
	}
	url := startDashboard(t, d)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	page, cancelPage := chromedp.NewContext(alloc)
	defer cancelPage()
	_, err = chromedp.Run(page, chromedp.Navigate(url))
	g.Expect(err).NotTo(HaveOccurred(), "opening %s in %s", url, chromium)
	// A reload would lose this mark.
	_, err = chromedp.Run(page, chromedp.Evaluate[chromedp.Void](`window.uprevTestMark = "not reloaded"`))
	g.Expect(err).NotTo(HaveOccurred())

	cell := func(selector string) func(g Gomega) string {
		return func(g Gomega) string {
			text, err := chromedp.Run(page, chromedp.Evaluate[string](`(function () {
				var c = document.querySelector('`+selector+`');
				return c ? c.dataset.state + ": " + c.innerText.replace(/\s+/g, " ").trim() : "";
			})()`))
			g.Expect(err).NotTo(HaveOccurred())
			return text
		}
	}
	live := func(g Gomega) string {
		mark, err := chromedp.Run(page, chromedp.Evaluate[string](`window.uprevTestMark + ", " + document.getElementById("live").textContent`))
		g.Expect(err).NotTo(HaveOccurred())
		return mark
	}
	g.Eventually(live).WithTimeout(30 * time.Second).Should(Equal("not reloaded, live"))
	g.Expect(cell(eu1Cell)(g)).To(MatchRegexp(`^up-to-date: 1\.0\.0@sha256:[0-9a-f]{12} CURRENT$`), "the matrix shows the version eu-1 runs")
	g.Expect(cell(us1Cell)(g)).To(MatchRegexp(`^up-to-date: 1\.0\.0@sha256:[0-9a-f]{12} CURRENT$`), "and us-1")

	t.Log("step 1: pushing agent 1.1.0")
	d.run(t, d.command(1, 0))
	g.Eventually(cell(eu1Cell)).WithTimeout(2*time.Minute).WithPolling(200*time.Millisecond).
		Should(MatchRegexp(`^up-to-date: 1\.1\.0@`), "eu-1 gets 1.1.0 first")
	// The page reads the Syncs and their targets' records in two lists: a
	// rendering whose Sync list came before the Sync's status named the new
	// revision, and whose record list came after eu-1 applied it, shows
	// us-1 behind; the next rendering, well within the pause, shows it
	// waiting.
	g.Eventually(cell(us1Cell)).WithTimeout(10*time.Second).WithPolling(200*time.Millisecond).
		Should(MatchRegexp(`^waiting: 1\.0\.0@sha256:[0-9a-f]{12} WAITING$`), "us-1 waits for the pause after eu-1")
	g.Eventually(func(g Gomega) string { return rollout(g, page) }).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).
		Should(MatchRegexp(`Wave 2: waiting \(rollout of main@sha1:[0-9a-f]+: 1 of 2 waves done, next wave in \d+s\)`))
	screenshot(t, page, "dashboard-waiting.png")
	g.Eventually(cell(us1Cell)).WithTimeout(time.Minute).WithPolling(200*time.Millisecond).
		Should(MatchRegexp(`^up-to-date: 1\.1\.0@sha256:[0-9a-f]{12} CURRENT$`), "us-1's waiting cell turns current")
	g.Expect(live(g)).To(Equal("not reloaded, live"), "the page changed without a reload")

	t.Log("step 4: reverting 1.1.0")
	d.run(t, d.command(4, 0))
	g.Eventually(cell(`td.latest`+agentRow)).WithTimeout(2*time.Minute).WithPolling(200*time.Millisecond).
		Should(MatchRegexp(`: 1\.1\.0@sha256:[0-9a-f]{12} held: reverted in [0-9a-f]{12}$`), "the latest version is held")
	holds, err := chromedp.Run(page, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("li.hold")).map(function (h) { return h.innerText; }).join("\n")`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holds).To(MatchRegexp(`^uprev-system/agent 1\.1\.0 is held: reverted in [0-9a-f]{12}\. Release it with uprev release-hold fleet agent -n uprev-system$`))
	g.Eventually(cell(us1Cell)).WithTimeout(time.Minute).WithPolling(200*time.Millisecond).
		Should(MatchRegexp(`^held: 1\.0\.0@sha256:[0-9a-f]{12} HELD$`), "the revert reaches us-1")
	g.Expect(live(g)).To(Equal("not reloaded, live"))
	screenshot(t, page, "dashboard-held.png")
}

// rollout returns the text of the demo Sync's rollout on the page.
func rollout(g Gomega, page context.Context) string {
	text, err := chromedp.Run(page, chromedp.Evaluate[string](`document.querySelector('article.rollout[data-sync="uprev-system/agent"]').innerText`))
	g.Expect(err).NotTo(HaveOccurred())
	return text
}

// screenshot writes a screenshot of the whole page into -screenshots, if
// set.
func screenshot(t *testing.T, page context.Context, name string) {
	t.Helper()
	if *screenshots == "" {
		return
	}
	png, err := chromedp.Run(page, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("taking %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(*screenshots, name), png, 0o644); err != nil {
		t.Fatalf("writing %s: %v", name, err)
	}
}

// serving is the line `uprev dashboard` prints once it listens.
var serving = regexp.MustCompile(`on (http://127\.0\.0\.1:\d+/) `)

// startDashboard starts `uprev dashboard` on the demo's management
// cluster, as a person would, and returns its address; the test's end
// stops it.
func startDashboard(t *testing.T, d *demo) string {
	t.Helper()
	out := &syncbuf.Buffer{}
	cmd := exec.Command(d.uprev, "dashboard", "--kubeconfig", d.state.KubeConfigs["management"], "-n", "uprev-system", "--address", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting uprev dashboard: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		NewWithT(t).Eventually(done).WithTimeout(30*time.Second).Should(Receive(BeNil()), "uprev dashboard stops on an interrupt:\n%s", out)
	})
	var url string
	NewWithT(t).Eventually(func(g Gomega) {
		m := serving.FindStringSubmatch(out.String())
		g.Expect(m).NotTo(BeNil(), out.String())
		url = m[1]
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return url
}
