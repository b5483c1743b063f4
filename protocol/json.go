package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/chatd/chatd/errcode"
)

// MaxJSONDepth bounds nesting in frames (and, through web, request bodies).
const MaxJSONDepth = 32

// DecodeJSON decodes one JSON value from data into v, strictly: data must
// be a single value; wrong types name the field; nesting deeper than
// MaxJSONDepth is refused before decoding. Unknown fields are ignored, so
// newer clients keep working against older servers. Its errors carry
// errcode.BadJSON or errcode.BadRequest and a sentence for the client.
func DecodeJSON(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errcode.Errorf(errcode.BadJSON, "the body is empty; send a JSON object")
	}
	if err := CheckDepth(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				return errcode.Errorf(errcode.BadRequest, "expected %s, got JSON %s", kindOf(te.Type.String()), te.Value)
			}
			return errcode.Errorf(errcode.BadRequest, "field %q must be %s, not %s", field, kindOf(te.Type.String()), te.Value)
		}
		return errcode.Errorf(errcode.BadJSON, "the body is not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errcode.Errorf(errcode.BadJSON, "the body must hold exactly one JSON value")
	}
	return nil
}

func kindOf(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map"), strings.HasPrefix(goType, "struct"), strings.Contains(goType, "."):
		if goType == "json.Number" {
			return "a number"
		}
		return "an object"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	}
	return goType
}

// CheckDepth refuses JSON nested deeper than MaxJSONDepth without decoding
// it (errcode.BadJSON).
func CheckDepth(data []byte) error {
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > MaxJSONDepth {
				return errcode.Errorf(errcode.BadJSON, "JSON nested deeper than %d levels", MaxJSONDepth)
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}
