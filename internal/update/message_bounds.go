package update

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// Bounds of a commit message template's execution. A template is written
// by whoever may create an automation, so what it may ask of the manager
// is bounded: past any bound, the execution stops with an error wrapping
// ErrTemplateBound and no commit is made.
const (
	// MaxMessageBytes is the largest commit message a template may write:
	// 64 KiB.
	MaxMessageBytes = 64 << 10
	// MaxTemplateValueBytes is the largest string, and the most bytes of
	// strings, a template function may take or return: MaxMessageBytes.
	MaxTemplateValueBytes = MaxMessageBytes
	// MaxTemplateListLength is the longest list or map a template function
	// may take or return (sprig's until, seq, list, concat...): 10,000.
	MaxTemplateListLength = 10000
	// MaxTemplateSteps is the most loop iterations, template calls and
	// function calls one execution may make: 100,000.
	MaxTemplateSteps = 100000
	// MaxTemplateDuration is the longest one execution may run: 2 s.
	MaxTemplateDuration = 2 * time.Second
	// maxFormatWidth is the largest width or precision printf may pad to.
	maxFormatWidth = 1024
)

// ErrTemplateBound is wrapped by the error of a template execution that
// went past one of the bounds above.
var ErrTemplateBound = errors.New("commit message template exceeds a bound")

// stepFunc is the function called at the start of every loop iteration
// and template call, inserted by boundTree.
const stepFunc = "uprevTemplateStep"

// budget is what is left to one template execution.
type budget struct {
	steps    int
	deadline time.Time
}

// step counts one step and fails past MaxTemplateSteps or the deadline.
func (b *budget) step() error {
	b.steps++
	if b.steps > MaxTemplateSteps {
		return fmt.Errorf("%w: more than %d steps (loop iterations, template and function calls)", ErrTemplateBound, MaxTemplateSteps)
	}
	if time.Now().After(b.deadline) {
		return fmt.Errorf("%w: it ran longer than %s", ErrTemplateBound, MaxTemplateDuration)
	}
	return nil
}

// boundedWriter keeps what is written, failing past MaxMessageBytes.
type boundedWriter struct {
	strings.Builder
}

// Write appends p unless the message would exceed MaxMessageBytes.
func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > MaxMessageBytes {
		return 0, fmt.Errorf("%w: the message is longer than %d bytes", ErrTemplateBound, MaxMessageBytes)
	}
	return w.Builder.Write(p)
}

// parseBounded parses text as template templateName with funcs, and inserts a
// step at the start of every loop body and template, so that no loop or
// recursion runs unbounded.
func parseBounded(templateName, text string, funcs template.FuncMap, options ...string) (*template.Template, error) {
	declared := template.FuncMap{stepFunc: func() string { return "" }}
	for name, fn := range funcs {
		declared[name] = fn
	}
	t, err := template.New(templateName).Funcs(declared).Option(options...).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing the commit message template: %w", err)
	}
	step, err := template.New("step").Funcs(declared).Parse("{{ " + stepFunc + " }}")
	if err != nil {
		return nil, fmt.Errorf("parsing the step action: %w", err)
	}
	stepNode := step.Root.Nodes[0]
	for _, tmpl := range t.Templates() {
		if tmpl.Tree != nil && tmpl.Root != nil {
			boundList(tmpl.Root, stepNode)
		}
	}
	return t, nil
}

// boundList puts step first in list and in every loop body under it.
func boundList(list *parse.ListNode, step parse.Node) {
	if list == nil {
		return
	}
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.RangeNode:
			boundList(n.List, step)
			boundList(n.ElseList, nil)
		case *parse.IfNode:
			boundList(n.List, nil)
			boundList(n.ElseList, nil)
		case *parse.WithNode:
			boundList(n.List, nil)
			boundList(n.ElseList, nil)
		}
	}
	if step != nil {
		list.Nodes = append([]parse.Node{step}, list.Nodes...)
	}
}

// executeBounded executes t on data with funcs bound to a fresh budget,
// into a writer bounded by MaxMessageBytes.
func executeBounded(t *template.Template, funcs template.FuncMap, data any) (string, error) {
	b := &budget{deadline: time.Now().Add(MaxTemplateDuration)}
	bound := template.FuncMap{stepFunc: func() (string, error) { return "", b.step() }}
	for name, fn := range funcs {
		bound[name] = boundFunc(b, fn)
	}
	c, err := t.Clone()
	if err != nil {
		return "", fmt.Errorf("cloning the commit message template: %w", err)
	}
	var w boundedWriter
	if err := c.Funcs(bound).Execute(&w, data); err != nil {
		return "", err
	}
	return w.String(), nil
}

// boundFunc wraps fn so that each call counts as a step, and takes and
// returns values within MaxTemplateValueBytes and MaxTemplateListLength.
// A refused call panics with the error, which text/template returns as
// the execution's error.
func boundFunc(b *budget, fn any) any {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func {
		return fn
	}
	return reflect.MakeFunc(v.Type(), func(args []reflect.Value) []reflect.Value {
		if err := b.step(); err != nil {
			panic(err)
		}
		if err := checkValues(args); err != nil {
			panic(fmt.Errorf("%w: arguments: %w", ErrTemplateBound, err))
		}
		var out []reflect.Value
		if v.Type().IsVariadic() {
			out = v.CallSlice(args)
		} else {
			out = v.Call(args)
		}
		if err := checkValues(out); err != nil {
			panic(fmt.Errorf("%w: result: %w", ErrTemplateBound, err))
		}
		return out
	}).Interface()
}

// checkValues fails when vs hold more than MaxTemplateValueBytes of
// strings, or a list or map longer than MaxTemplateListLength.
func checkValues(vs []reflect.Value) error {
	total := 0
	for _, v := range vs {
		n, err := valueSize(v, 0)
		if err != nil {
			return err
		}
		total += n
	}
	if total > MaxTemplateValueBytes {
		return fmt.Errorf("%d bytes of text, more than %d", total, MaxTemplateValueBytes)
	}
	return nil
}

// valueSize is the bytes of strings in v, looking two levels into lists
// and maps.
func valueSize(v reflect.Value, depth int) (int, error) {
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
		if v.IsNil() {
			return 0, nil
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return 0, nil
	}
	switch v.Kind() {
	case reflect.String:
		return v.Len(), nil
	case reflect.Slice, reflect.Array, reflect.Map:
		if v.Len() > MaxTemplateListLength {
			return 0, fmt.Errorf("a list of %d items, more than %d", v.Len(), MaxTemplateListLength)
		}
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Len(), nil
		}
		if depth > 1 {
			return 0, nil
		}
		total := 0
		add := func(e reflect.Value) error {
			n, err := valueSize(e, depth+1)
			total += n
			return err
		}
		if v.Kind() == reflect.Map {
			for it := v.MapRange(); it.Next(); {
				if err := add(it.Key()); err != nil {
					return 0, err
				}
				if err := add(it.Value()); err != nil {
					return 0, err
				}
			}
			return total, nil
		}
		for i := range v.Len() {
			if err := add(v.Index(i)); err != nil {
				return 0, err
			}
		}
		return total, nil
	}
	return 0, nil
}

// countFits fails when a function would make more than
// MaxTemplateListLength items, or more than MaxTemplateValueBytes of text.
func countFits(name string, items, bytes int) error {
	switch {
	case items > MaxTemplateListLength || items < 0:
		return fmt.Errorf("%w: %s of %d items, more than %d", ErrTemplateBound, name, items, MaxTemplateListLength)
	case bytes > MaxTemplateValueBytes || bytes < 0:
		return fmt.Errorf("%w: %s of %d bytes, more than %d", ErrTemplateBound, name, bytes, MaxTemplateValueBytes)
	}
	return nil
}

// builtinFuncs are text/template's builtins that allocate from their
// arguments, replaced by bounded ones: printf refuses widths and
// precisions over maxFormatWidth.
func builtinFuncs() template.FuncMap {
	return template.FuncMap{
		"printf": func(format string, args ...any) (string, error) {
			if err := checkFormat(format); err != nil {
				return "", err
			}
			return fmt.Sprintf(format, args...), nil
		},
		"print":   fmt.Sprint,
		"println": fmt.Sprintln,
	}
}

// checkFormat refuses a printf format with a width or precision over
// maxFormatWidth, or one taken from an argument (`*`).
func checkFormat(format string) error {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		n := 0
	spec:
		for i++; i < len(format); i++ {
			switch c := format[i]; {
			case c == '*':
				return fmt.Errorf("%w: printf width or precision from an argument (*)", ErrTemplateBound)
			case c >= '0' && c <= '9':
				if n = n*10 + int(c-'0'); n > maxFormatWidth {
					return fmt.Errorf("%w: printf width or precision over %d", ErrTemplateBound, maxFormatWidth)
				}
			case c == '.' || c == '[' || c == ']' || strings.IndexByte("+-# ", c) >= 0:
				n = 0
			default:
				break spec
			}
		}
	}
	return nil
}

// removedSprigFuncs are sprig functions Flux's templates have that uprev
// leaves out: each costs much CPU for nothing a commit message needs (key
// and certificate generation, password hashing, encryption).
var removedSprigFuncs = []string{
	"genPrivateKey", "derivePassword", "buildCustomCert", "genCA", "genCAWithKey",
	"genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
	"bcrypt", "htpasswd", "encryptAES", "decryptAES",
}

// cappedSprigFuncs replaces the sprig functions of funcs that allocate
// from a number (repeat, until, untilStep, seq, indent, nindent) with ones
// that refuse, before allocating, to make more than MaxTemplateListLength
// items or MaxTemplateValueBytes bytes.
func cappedSprigFuncs(funcs template.FuncMap) {
	repeat := funcs["repeat"].(func(int, string) string)
	until := funcs["until"].(func(int) []int)
	untilStep := funcs["untilStep"].(func(int, int, int) []int)
	seq := funcs["seq"].(func(...int) string)
	indent := funcs["indent"].(func(int, string) string)
	nindent := funcs["nindent"].(func(int, string) string)
	funcs["repeat"] = func(count int, s string) (string, error) {
		if len(s) > 0 && count > MaxTemplateValueBytes/len(s) {
			return "", fmt.Errorf("%w: repeat of more than %d bytes", ErrTemplateBound, MaxTemplateValueBytes)
		}
		return repeat(count, s), nil
	}
	funcs["until"] = func(count int) ([]int, error) {
		if err := countFits("until", rangeLength(0, count, 1), 0); err != nil {
			return nil, err
		}
		return until(count), nil
	}
	funcs["untilStep"] = func(start, stop, step int) ([]int, error) {
		if err := countFits("untilStep", rangeLength(start, stop, step), 0); err != nil {
			return nil, err
		}
		return untilStep(start, stop, step), nil
	}
	funcs["seq"] = func(params ...int) (string, error) {
		n := 0
		switch len(params) {
		case 1:
			n = rangeLength(1, params[0], 1)
		case 2:
			n = rangeLength(params[0], params[1], 1)
		case 3:
			n = rangeLength(params[0], params[2], params[1])
		}
		if err := countFits("seq", n, 0); err != nil {
			return "", err
		}
		return seq(params...), nil
	}
	indentBytes := func(spaces int, v string) int {
		if spaces > MaxTemplateValueBytes {
			return -1
		}
		return max(spaces, 0)*(strings.Count(v, "\n")+1) + len(v)
	}
	funcs["indent"] = func(spaces int, v string) (string, error) {
		if err := countFits("indent", 0, indentBytes(spaces, v)); err != nil {
			return "", err
		}
		return indent(spaces, v), nil
	}
	funcs["nindent"] = func(spaces int, v string) (string, error) {
		if err := countFits("nindent", 0, indentBytes(spaces, v)); err != nil {
			return "", err
		}
		return nindent(spaces, v), nil
	}
}

// rangeLength is about how many numbers go from start towards stop by
// step (in either direction, as sprig's functions count them), without
// overflowing; -1 when it is more than an int holds.
func rangeLength(start, stop, step int) int {
	if step == 0 {
		step = 1
	}
	n := (float64(stop) - float64(start)) / float64(step)
	if n < 0 {
		n = -n
	}
	if n > float64(MaxTemplateListLength) {
		return MaxTemplateListLength + 1
	}
	return int(n) + 1
}
