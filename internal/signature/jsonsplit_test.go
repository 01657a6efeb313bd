package signature

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestSplitJSON sets apart the payload of DSSE envelopes and bundles as
// cosign and protojson write them, and as someone hiding a second payload
// or escaping would: the kept document is the rest, with the placeholder,
// and the stream is the string's characters.
func TestSplitJSON(t *testing.T) {
	for name, c := range map[string]struct {
		doc, kept, taken string
		path             []string
		err              string
	}{
		"envelope": {path: []string{"payload"}, doc: `{"payloadType":"application/vnd.in-toto+json", "payload" : "eyJhIjoxfQ==","signatures":[{"keyid":"","sig":"MEU\/"}]}`,
			kept: `{"payloadType":"application/vnd.in-toto+json","payload":"","signatures":[{"keyid":"","sig":"MEU\/"}]}`, taken: "eyJhIjoxfQ=="},
		"bundle, payload last": {path: []string{"dsseEnvelope", "payload"}, doc: "{\"mediaType\":\"b\",\n \"dsseEnvelope\": {\"payloadType\":\"t\",\"signatures\":[{\"sig\":\"AA==\"}],\"payload\":\"ab\\/c\"}}",
			kept: `{"mediaType":"b","dsseEnvelope":{"payloadType":"t","signatures":[{"sig":"AA=="}],"payload":""}}`, taken: "ab/c"},
		"a payload elsewhere is kept": {path: []string{"dsseEnvelope", "payload"}, doc: `{"payload":"x","dsseEnvelope":{"payload":"y"},"z":[{"payload":"w"}]}`,
			kept: `{"payload":"x","dsseEnvelope":{"payload":""},"z":[{"payload":"w"}]}`, taken: "y"},
		"two payloads":    {path: []string{"payload"}, doc: `{"payload":"x","payload":"y"}`, err: `two members named "payload"`},
		"an escaped name": {path: []string{"payload"}, doc: `{"pay\u006coad":"x"}`, kept: `{"pay\u006coad":""}`, taken: "x"},
		"a predicate skipped": {path: []string{"predicate"}, doc: `{"_type":"s","predicate":{"a":["\"}",{"b":null}],"c":1.5e3},"predicateType":"p"}`,
			kept: `{"_type":"s","predicate":{},"predicateType":"p"}`},
		"an escape in the payload": {path: []string{"payload"}, doc: `{"payload":"a\u0041"}`, err: `escape \u`},
		"nested too deep":          {path: []string{"payload"}, doc: strings.Repeat(`{"a":`, 100), err: "nested more than"},
		"cut short":                {path: []string{"payload"}, doc: `{"payload":"abc`, err: "EOF"},
	} {
		t.Run(name, func(t *testing.T) {
			var taken []byte
			take := func(r io.Reader) error {
				var err error
				taken, err = io.ReadAll(r)
				return err
			}
			placeholder := `""`
			if c.path[0] == "predicate" {
				placeholder, take = "{}", nil
			}
			kept, err := splitJSON(bufio.NewReaderSize(strings.NewReader(c.doc), 16), c.path, placeholder, take, 1<<10)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(kept) != c.kept || string(taken) != c.taken {
				t.Fatalf("kept %s and took %q, want %s and %q", kept, taken, c.kept, c.taken)
			}
		})
	}
	if _, err := splitJSON(bufio.NewReader(strings.NewReader(`{"a":"`+strings.Repeat("x", 2<<10)+`"}`)), []string{"payload"}, `""`, nil, 1<<10); err != errKeptTooLarge {
		t.Fatalf("a document over its bound besides the payload: %v", err)
	}
}

// FuzzSplitJSON feeds any document to splitJSON: nothing may panic, and a
// valid document with nothing set apart is kept as it is, compacted.
func FuzzSplitJSON(f *testing.F) {
	f.Add([]byte(`{"payloadType":"t","payload":"eyJhIjoxfQ==","signatures":[{"sig":"AA=="}]}`))
	f.Add([]byte(`{"a":[1,true,null,"\"\\"],"b":{"c":-1.5e3}}`))
	f.Add([]byte(`{"payload":{"x":"y"}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, path := range [][]string{{"payload"}, {"dsseEnvelope", "payload"}} {
			take := func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }
			_, _ = splitJSON(bufio.NewReaderSize(bytes.NewReader(doc), 16), path, `""`, take, 1<<20)
		}
		kept, err := splitJSON(bufio.NewReaderSize(bytes.NewReader(doc), 16), []string{"\x00none"}, `""`, nil, 1<<20)
		var compact bytes.Buffer
		if json.Compact(&compact, doc) != nil {
			return
		}
		if err != nil || !bytes.Equal(kept, compact.Bytes()) {
			t.Fatalf("kept %q (%v) of %q, want it compacted: %q", kept, err, doc, compact.Bytes())
		}
	})
}
