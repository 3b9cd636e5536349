package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// checkStrict refuses what encoding/json accepts silently in a body that
// it has already decoded (so data is one well-formed JSON value):
//
//   - a name repeated in an object, which encoding/json resolves by keeping
//     the last. In an object decoded into a struct, names are compared as
//     encoding/json binds them (case-insensitively: "text" and "Text" set
//     the same field); in free-form JSON kept as is (json.RawMessage, such
//     as a message's content), exactly.
//   - a \u escape of a UTF-16 surrogate that is not half of a pair, which
//     encoding/json turns into U+FFFD (and a json.RawMessage would store).
//
// t is the Go type the body decodes into. The walk allocates only for the
// names of objects with escapes in their names, and for the sets of names
// of large free-form objects.
func checkStrict(data []byte, t reflect.Type) error {
	w := strictWalker{data: data}
	if err := w.value(t); err != nil {
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	return nil
}

type strictWalker struct {
	data []byte
	i    int
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// peek is the next byte that is not white space, 0 at the end.
func (w *strictWalker) peek() byte {
	w.skipSpace()
	if w.i >= len(w.data) {
		return 0
	}
	return w.data[w.i]
}

func (w *strictWalker) skipSpace() {
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// value walks one value; t is nil for free-form JSON.
func (w *strictWalker) value(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || (t != nil && t.Kind() == reflect.Interface) {
		t = nil
	}
	switch w.peek() {
	case 0:
		return fmt.Errorf("unexpected end of body at byte %d", w.i)
	case '{':
		return w.object(t)
	case '[':
		return w.array(t)
	case '"':
		_, _, err := w.str()
		return err
	default: // a number, true, false or null
		for w.i < len(w.data) {
			switch w.data[w.i] {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				return nil
			}
			w.i++
		}
		return nil
	}
}

func (w *strictWalker) array(t reflect.Type) error {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	w.i++ // [
	for {
		switch w.peek() {
		case ']':
			w.i++
			return nil
		case 0:
			return fmt.Errorf("unterminated array at byte %d", w.i)
		}
		if err := w.value(elem); err != nil {
			return err
		}
		if w.peek() == ',' {
			w.i++
		}
	}
}

// maxLinearNames is how many names of a free-form object are compared
// pairwise before they go into a set.
const maxLinearNames = 16

func (w *strictWalker) object(t reflect.Type) error {
	var fields []structField
	bound := t != nil && t.Kind() == reflect.Struct
	if bound {
		fields = fieldsOf(t)
	}
	var names []string
	var set map[string]struct{}
	w.i++ // {
	for {
		switch w.peek() {
		case '}':
			w.i++
			return nil
		case '"':
		default:
			return fmt.Errorf("malformed object at byte %d", w.i)
		}
		start := w.i
		raw, escaped, err := w.str()
		if err != nil {
			return err
		}
		name := unescapeName(raw[1:len(raw)-1], escaped)
		var fieldType reflect.Type
		switch {
		case bound:
			// Only names of fields get here (unknown ones were refused),
			// so the list stays as short as the struct.
			for _, seen := range names {
				if strings.EqualFold(seen, name) {
					return fmt.Errorf("duplicate field %q at byte %d", name, start)
				}
			}
			names = append(names, name)
			fieldType = fieldTypeOf(fields, name)
		case set != nil:
			if _, dup := set[name]; dup {
				return fmt.Errorf("duplicate name %q at byte %d", name, start)
			}
			set[name] = struct{}{}
		default:
			for _, seen := range names {
				if seen == name {
					return fmt.Errorf("duplicate name %q at byte %d", name, start)
				}
			}
			names = append(names, name)
			if len(names) > maxLinearNames {
				set = make(map[string]struct{}, 2*len(names))
				for _, n := range names {
					set[n] = struct{}{}
				}
			}
		}
		if w.peek() != ':' {
			return fmt.Errorf("malformed object at byte %d", w.i)
		}
		w.i++
		var child reflect.Type
		if bound {
			child = fieldType
		} else if t != nil && t.Kind() == reflect.Map {
			child = t.Elem()
		}
		if err := w.value(child); err != nil {
			return err
		}
		if w.peek() == ',' {
			w.i++
		}
	}
}

// str walks a string and returns it with its quotes, and whether it has an
// escape; a lone surrogate escape is refused.
func (w *strictWalker) str() (raw []byte, escaped bool, err error) {
	start := w.i
	w.i++ // "
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case '"':
			w.i++
			return w.data[start:w.i], escaped, nil
		case '\\':
			escaped = true
			if w.i+1 < len(w.data) && w.data[w.i+1] == 'u' {
				r, ok := hex4(w.data, w.i+2)
				if !ok {
					return nil, false, fmt.Errorf("bad \\u escape at byte %d", w.i)
				}
				switch {
				case r >= 0xD800 && r <= 0xDBFF:
					lo, ok := rune(0), false
					if w.i+11 < len(w.data) && w.data[w.i+6] == '\\' && w.data[w.i+7] == 'u' {
						lo, ok = hex4(w.data, w.i+8)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return nil, false, fmt.Errorf("\\u%04X at byte %d is half of a UTF-16 surrogate pair without its other half", r, w.i)
					}
					w.i += 12
				case r >= 0xDC00 && r <= 0xDFFF:
					return nil, false, fmt.Errorf("\\u%04X at byte %d is half of a UTF-16 surrogate pair without its other half", r, w.i)
				default:
					w.i += 6
				}
				continue
			}
			w.i += 2
		default:
			w.i++
		}
	}
	return nil, false, fmt.Errorf("unterminated string at byte %d", start)
}

// unescapeName is the text of a string walked by str (without its
// quotes): its escapes are JSON's, and its surrogate escapes are pairs.
func unescapeName(b []byte, escaped bool) string {
	if !escaped {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			sb.WriteByte(b[i])
			continue
		}
		i++
		switch b[i] {
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, _ := hex4(b, i+1)
			i += 4
			if utf16.IsSurrogate(r) && i+6 < len(b) {
				lo, _ := hex4(b, i+3)
				r = utf16.DecodeRune(r, lo)
				i += 6
			}
			sb.WriteRune(r)
		default: // " \ /
			sb.WriteByte(b[i])
		}
	}
	return sb.String()
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// structField is a field of a request type as encoding/json names it.
type structField struct {
	name string
	typ  reflect.Type
}

var fieldCache sync.Map // reflect.Type → []structField

// fieldsOf lists the JSON fields of a struct type (the request types have
// no embedded structs).
func fieldsOf(t reflect.Type) []structField {
	if v, ok := fieldCache.Load(t); ok {
		return v.([]structField)
	}
	var out []structField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			tagName, _, _ := strings.Cut(tag, ",")
			if tagName == "-" {
				continue
			}
			if tagName != "" {
				name = tagName
			}
		}
		out = append(out, structField{name: name, typ: f.Type})
	}
	fieldCache.Store(t, out)
	return out
}

// fieldTypeOf is the type of the field name binds to, as encoding/json
// binds it (an exact match first, then case-insensitively); nil when none.
func fieldTypeOf(fields []structField, name string) reflect.Type {
	for _, f := range fields {
		if f.name == name {
			return f.typ
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, name) {
			return f.typ
		}
	}
	return nil
}

// checkText refuses a string that is not valid UTF-8, has a NUL byte or is
// longer than max bytes; field names it in the refusal.
func checkText(field, v string, max int) error { return checkTextOf("", field, v, max) }

// checkTextOf is checkText of the field named prefix+field: the name is
// only put together for a refusal.
func checkTextOf(prefix, field, v string, max int) error {
	switch {
	case len(v) > max:
		return fmt.Errorf("%w: %s%s is longer than %d bytes", errBadRequest, prefix, field, max)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s%s is not valid UTF-8", errBadRequest, prefix, field)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s%s contains a NUL byte", errBadRequest, prefix, field)
	}
	return nil
}
