package signature

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// splitJSON reads one JSON object from r and sets apart the member at
// path (member names from the outermost object in), which may be larger
// than memory should hold: it keeps the rest of the document, at most
// maxKept bytes, with that member's value replaced by placeholder, and
// gives the value to take as a stream: a string's characters between its
// quotes, or nothing for another value, which is skipped (take nil skips
// a string too). The kept document is then decoded by the usual parsers.
//
// It is written by hand because encoding/json (Decoder.Token included)
// and protojson hold each value, and each string, whole in memory: the
// base64 payload of a DSSE envelope, or the predicate of an SBOM
// statement, is tens of megabytes. It checks structure only as far as it
// needs to find the member; the kept document is parsed in full later,
// and a skipped value is covered by the signature over the payload.
func splitJSON(r *bufio.Reader, path []string, placeholder string, take func(io.Reader) error, maxKept int) ([]byte, error) {
	s := &splitter{r: r, placeholder: placeholder, take: take, max: maxKept}
	if err := s.value(0, path); err != nil {
		return nil, err
	}
	return s.kept.Bytes(), nil
}

// maxJSONDepth bounds the nesting splitJSON follows.
const maxJSONDepth = 64

// errKeptTooLarge is the error of a document whose kept part is over its
// bound.
var errKeptTooLarge = errors.New("larger than its bound besides the part read as a stream")

type splitter struct {
	r           *bufio.Reader
	placeholder string
	take        func(io.Reader) error
	max         int
	kept        bytes.Buffer
	// skipping is set while a value is read and not kept.
	skipping bool
	// setApartDone is set once the member at the path is read.
	setApartDone bool
}

// emit keeps b unless a value is being skipped.
func (s *splitter) emit(b ...byte) error {
	if s.skipping {
		return nil
	}
	if s.kept.Len()+len(b) > s.max {
		return errKeptTooLarge
	}
	s.kept.Write(b)
	return nil
}

// peek returns the next byte that is not white space, unread.
func (s *splitter) peek() (byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c, s.r.UnreadByte()
	}
}

// value reads one value; rest is the path below it, nil when it is off
// the path.
func (s *splitter) value(depth int, rest []string) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("nested more than %d deep", maxJSONDepth)
	}
	c, err := s.peek()
	if err != nil {
		return err
	}
	switch c {
	case '{':
		return s.object(depth, rest)
	case '[':
		return s.array(depth)
	case '"':
		_, _ = s.r.ReadByte()
		if err := s.emit('"'); err != nil {
			return err
		}
		if err := s.copyString(s.emit); err != nil {
			return err
		}
		return s.emit('"')
	}
	for n := 0; ; n++ {
		c, err := s.r.ReadByte()
		if errors.Is(err, io.EOF) && n > 0 {
			return nil // a number or literal ends the document
		}
		if err != nil {
			return err
		}
		switch c {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return s.r.UnreadByte()
		}
		if err := s.emit(c); err != nil {
			return err
		}
	}
}

// expect reads the next byte that is not white space, which must be c,
// and keeps it.
func (s *splitter) expect(c byte) error {
	if _, err := s.peek(); err != nil {
		return err
	}
	got, _ := s.r.ReadByte()
	if got != c {
		return fmt.Errorf("%q where %q belongs", got, c)
	}
	return s.emit(c)
}

func (s *splitter) object(depth int, rest []string) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	for first := true; ; first = false {
		c, err := s.peek()
		if err != nil {
			return err
		}
		if c == '}' || !first {
			_, _ = s.r.ReadByte()
			if err := s.emit(c); err != nil {
				return err
			}
			if c == '}' {
				return nil
			}
			if c != ',' {
				return fmt.Errorf("%q between the members of an object", c)
			}
		}
		name, err := s.memberName(rest != nil)
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		switch {
		case len(rest) == 1 && name == rest[0] && s.setApartDone:
			// Parsers differ on which of the two counts.
			return fmt.Errorf("two members named %q", name)
		case len(rest) == 1 && name == rest[0]:
			s.setApartDone = true
			err = s.setApart(depth)
		case len(rest) > 1 && name == rest[0]:
			err = s.value(depth+1, rest[1:])
		default:
			err = s.value(depth+1, nil)
		}
		if err != nil {
			return err
		}
	}
}

// memberName reads the name of an object's member, and decodes it when
// the object is on the path.
func (s *splitter) memberName(decode bool) (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	out := s.emit
	var raw []byte
	if decode {
		raw = []byte{'"'}
		out = func(b ...byte) error { raw = append(raw, b...); return s.emit(b...) }
	}
	if err := s.copyString(out); err != nil {
		return "", err
	}
	if err := s.emit('"'); err != nil || !decode {
		return "", err
	}
	var name string
	if err := json.Unmarshal(append(raw, '"'), &name); err != nil {
		return "", fmt.Errorf("a member name: %w", err)
	}
	return name, nil
}

func (s *splitter) array(depth int) error {
	if err := s.expect('['); err != nil {
		return err
	}
	for first := true; ; first = false {
		c, err := s.peek()
		if err != nil {
			return err
		}
		if c == ']' || !first {
			_, _ = s.r.ReadByte()
			if err := s.emit(c); err != nil {
				return err
			}
			if c == ']' {
				return nil
			}
			if c != ',' {
				return fmt.Errorf("%q between the elements of an array", c)
			}
		}
		if err := s.value(depth+1, nil); err != nil {
			return err
		}
	}
}

// setApart reads the value at the path: it keeps the placeholder, gives
// a string's characters to take, and skips any other value.
func (s *splitter) setApart(depth int) error {
	if err := s.emit([]byte(s.placeholder)...); err != nil {
		return err
	}
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c != '"' || s.take == nil {
		s.skipping = true
		defer func() { s.skipping = false }()
		return s.value(depth+1, nil)
	}
	_, _ = s.r.ReadByte()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := s.take(pr)
		// Writes past what take read fail, and end the string.
		_ = pr.CloseWithError(err)
		done <- err
	}()
	err = s.copyString(func(b ...byte) error {
		if len(b) == 2 && b[0] == '\\' {
			switch b[1] {
			case '/', '"', '\\':
				b = b[1:]
			default:
				return fmt.Errorf("escape \\%c in a string read as a stream", b[1])
			}
		}
		_, err := pw.Write(b)
		return err
	})
	_ = pw.CloseWithError(err)
	if takeErr := <-done; takeErr != nil {
		return takeErr
	}
	return err
}

// copyString gives the characters of a string, its opening quote read,
// to out up to its closing quote, which it reads: an escape as its two
// bytes together, other characters in runs.
func (s *splitter) copyString(out func(...byte) error) error {
	for {
		chunk, err := s.r.ReadSlice('"')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		closing := err == nil
		if closing {
			chunk = chunk[:len(chunk)-1]
		}
		// An escape's backslash splits the run: the escaped byte may be
		// a quote, which does not end the string.
		for {
			i := bytes.IndexByte(chunk, '\\')
			if i < 0 {
				break
			}
			if err := out(chunk[:i]...); err != nil {
				return err
			}
			escaped, ok := byte(0), i+1 < len(chunk)
			if ok {
				escaped, chunk = chunk[i+1], chunk[i+2:]
			} else if closing {
				escaped, chunk, closing = '"', nil, false
			} else {
				chunk = nil
				if escaped, err = s.r.ReadByte(); err != nil {
					return err
				}
			}
			if err := out('\\', escaped); err != nil {
				return err
			}
		}
		if err := out(chunk...); err != nil {
			return err
		}
		if closing {
			return nil
		}
	}
}
