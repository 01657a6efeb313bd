package update

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseMarker checks that any comment either is refused with
// ErrNoMarker or ErrInvalidMarker, or gives a marker of a known kind that
// formats back to a marker parsing to the same value.
func FuzzParseMarker(f *testing.F) {
	for _, seed := range []string{
		`# {"$imagepolicy": "flux-system:agent"}`,
		`# {"$imagepolicy": "flux-system:agent:tag"}`,
		`#{"$imagepolicy":"a:b:digest","x":[1,{}]}`,
		`# {"$imagepolicy": "agent"}`,
		`# {"$imagepolicy": "a:b:c:d"}`,
		`# {"$imagepolicy": flux}`,
		`# {"$imagepolicy": null}`,
		`# just a comment`,
		`# {"$uprev": "platform:kubernetes"}`,
		`# {"$uprev": "platform:kubernetes:sha256:kubeadm"}`,
		`# {"$uprev": "kubernetes:url:a.b_c-d"}`,
		`# {"$uprev": "a:b", "$imagepolicy": "a:b"}`,
	} {
		f.Add(seed, "flux-system")
	}
	f.Fuzz(func(t *testing.T, comment, defaultNamespace string) {
		m, err := ParseMarker(comment, defaultNamespace)
		if err != nil {
			if !errors.Is(err, ErrNoMarker) && !errors.Is(err, ErrInvalidMarker) {
				t.Fatalf("error %v wraps neither ErrNoMarker nor ErrInvalidMarker", err)
			}
			return
		}
		token := MarkerToken
		switch m.Kind {
		case KindImage, KindName, KindTag, KindDigest:
		case KindVersion, KindAssetURL, KindAssetSHA256:
			token = SourceMarkerToken
		default:
			t.Fatalf("unknown kind %q", m.Kind)
		}
		if (token == SourceMarkerToken) != (m.Policy.Kind == SourceKind) {
			t.Fatalf("marker %+v: kind %q with policy kind %q", m, m.Kind, m.Policy.Kind)
		}
		again, err := ParseMarker(`# {"`+token+`": "`+m.String()+`"}`, "")
		if err != nil || again != m {
			t.Fatalf("marker %+v formats as %q, which parses as %+v, %v", m, m.String(), again, err)
		}
	})
}

// FuzzRewrite checks that rewriting any content never panics, changes no
// byte outside the marked values, reads back as written and is idempotent.
func FuzzRewrite(f *testing.F) {
	err := filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(p)) != "original" {
			return err
		}
		data, err := os.ReadFile(p)
		f.Add(data)
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		"a: 1\r\nimage: x:1 # {\"$imagepolicy\": \"ns:agent\"}\r\n",
		"\uFEFFtag: &t !!str 1.0 # {\"$imagepolicy\": \"ns:agent:tag\"}\nb: *t\n",
		"images: [\n  x:1, # {\"$imagepolicy\": \"ns:agent\"}\n  y:2\n]\n",
		"tag: 'it''s' # {\"$imagepolicy\": \"agent:tag\"}\n",
		"d: \"\\u0041\" # {\"$imagepolicy\": \"ns:agent:digest\"}\n",
	} {
		f.Add([]byte(seed))
	}
	rw := &rewriter{
		policies: map[PolicyKey]Ref{
			{Namespace: "ns", Name: "agent"}:            {Image: "ghcr.io/acme/agent", Tag: "1.10", Digest: "sha256:abc"},
			{Namespace: "flux-system", Name: "agent"}:   {Image: "ghcr.io/acme/agent", Tag: "1.4.2"},
			{Namespace: "flux-system", Name: "podinfo"}: {Image: "ghcr.io/stefanprodan/podinfo", Tag: "6.5.4", Digest: "sha256:def"},
			{Namespace: "flux-system", Name: "chart"}:   {Image: "ghcr.io/acme/charts/agent", Tag: "2.3.1"},
			{Namespace: "apps", Name: "web"}:            {Image: "registry.example.com:5000/apps/web", Tag: "it's \"quoted\"\n"},
		},
		defaultNamespace: "ns",
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		res := rw.rewriteFile("f.yaml", src)
		if len(res.errs) > 0 {
			if res.out != nil || len(res.changes) > 0 {
				t.Fatal("a file with errors was changed")
			}
			return
		}
		if res.out == nil {
			if len(res.changes) > 0 {
				t.Fatal("changes reported but no content written")
			}
			return
		}
		before, errs := scanMarkers(src, rw.defaultNamespace)
		after, errs2 := scanMarkers(res.out, rw.defaultNamespace)
		if len(errs) > 0 || len(errs2) > 0 || len(before) != len(after) {
			t.Fatalf("markers do not read back: %v %v", errs, errs2)
		}
		// Outside the values, the bytes are the original ones.
		var rebuilt []byte
		last := 0
		for i, st := range before {
			rebuilt = append(rebuilt, src[last:st.start]...)
			rebuilt = append(rebuilt, res.out[after[i].start:after[i].end]...)
			last = st.end
		}
		rebuilt = append(rebuilt, src[last:]...)
		if !bytes.Equal(rebuilt, res.out) {
			t.Fatalf("bytes outside values changed:\n%q\n%q", src, res.out)
		}
		for i, st := range after {
			ref, ok := rw.policies[st.marker.Policy]
			if ok && ref.Value(st.marker.Kind) != "" && st.value != ref.Value(st.marker.Kind) {
				t.Fatalf("marker at line %d holds %q, want %q", st.line, st.value, ref.Value(st.marker.Kind))
			}
			if !ok && st.value != before[i].value {
				t.Fatalf("marker of an unknown policy at line %d changed", st.line)
			}
		}
		if again := rw.rewriteFile("f.yaml", res.out); again.out != nil || len(again.errs) > 0 {
			t.Fatalf("second run changed the file again: %v", again.errs)
		}
	})
}
