package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestGetTemplates shows -o jsonpath= and -o custom-columns= (and their
// -file forms), as kubectl prints them: jsonpath walks a v1 List of the
// objects, or the object alone when one is named; custom columns print a
// line per object, holds as records.
func TestGetTemplates(t *testing.T) {
	ns := newNamespace(t)
	createFleet(t, ns)
	dir := t.TempDir()
	jsonpathFile := filepath.Join(dir, "names.jsonpath")
	columnsFile := filepath.Join(dir, "columns.txt")
	if err := os.WriteFile(jsonpathFile, []byte(`{range .items[*]}{.kind}/{.metadata.name}{"\n"}{end}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(columnsFile, []byte("NAME         SUSPENDED\n.metadata.name .spec.suspend\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{
			args: []string{"get", "syncs", "-o", "jsonpath={.items[*].metadata.name}"},
			want: "prod staging",
		},
		{
			args: []string{"get", "sync", "prod", "-o", `jsonpath={.status.lastAttemptedRevision}{"\n"}`},
			want: syncRevision + "\n",
		},
		{
			args: []string{"get", "policies", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.latestRef.tag}{"\n"}{end}`},
			want: table("agent=1.4.2", "kms="),
		},
		{
			args: []string{"get", "policies", "-o", "jsonpath-file=" + jsonpathFile},
			want: table("ImagePolicy/agent", "ImagePolicy/kms"),
		},
		{
			args: []string{"get", "holds", "-o", `jsonpath={range .items[*]}{.automation} {.version}{"\n"}{end}`},
			want: table("fleet 1.4.2", "fleet 2.1.0", "flux-system 3.0.0"),
		},
		{
			args: []string{"get", "policies", "-o", "custom-columns=NAME:.metadata.name,TAG:.status.latestRef.tag"},
			want: table(
				"NAME    TAG",
				"agent   1.4.2",
				"kms     <none>",
			),
		},
		{
			args: []string{"get", "holds", "--no-headers", "-o", "custom-columns=POLICY:policy,REVERTED:revertedIn"},
			want: table(
				ns+"/agent   "+agentRevert,
				ns+"/app     "+appRevert,
				ns+"/web     "+webRevert,
			),
		},
		{
			args: []string{"get", "automations", "-o", "custom-columns-file=" + columnsFile},
			want: table(
				"NAME     SUSPENDED",
				"fleet    <none>",
				"paused   true",
			),
		},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			r := uprev(t, append(tc.args, "-n", ns, kubeconfigFlag)...)
			g.Expect(r).To(Equal(result{stdout: tc.want}))
		})
	}

	t.Run("bad templates", func(t *testing.T) {
		g := NewWithT(t)
		r := uprev(t, "get", "syncs", "-n", ns, "-o", "jsonpath={.items[", kubeconfigFlag)
		g.Expect(r.code).To(Equal(1))
		g.Expect(r.stderr).To(HavePrefix("uprev get syncs: parsing the jsonpath template"))
		r = uprev(t, "get", "syncs", "-n", ns, "-o", "custom-columns=NAME", kubeconfigFlag)
		g.Expect(r.code).To(Equal(1))
		g.Expect(r.stderr).To(ContainSubstring("expected <header>:<json-path-expr>"))
		r = uprev(t, "get", "syncs", "-n", ns, "-o", "go-template={{.}}", kubeconfigFlag)
		g.Expect(r.code).To(Equal(1))
		g.Expect(r.stderr).To(ContainSubstring(`unknown output format "go-template={{.}}": want wide, yaml, json, name, jsonpath=TEMPLATE`))
	})
}
