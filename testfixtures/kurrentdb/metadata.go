package kurrentdb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// deletedStream is the event number KurrentDB gives a tombstone
// (EventNumber.DeletedStream, long.MaxValue) and the $tb a soft delete
// writes.
const deletedStream = math.MaxInt64

const (
	metadataEventType  = "$metadata"
	tombstoneEventType = "$streamDeleted"
	contentTypeJSON    = "application/json"
	contentTypeBinary  = "application/octet-stream"
)

// streamMetadata is the part of a stream's metadata the server acts on.
// The zero value is KurrentDB's StreamMetadata.Empty.
type streamMetadata struct {
	maxCount       int64 // 0: none
	maxAge         time.Duration
	truncateBefore int64 // -1: none
}

var emptyMetadata = streamMetadata{truncateBefore: -1}

// metastreamMetadata is what the server applies to every $$ stream
// (--metastream-max-count 1: only the latest metadata counts and survives a
// scavenge).
var metastreamMetadata = streamMetadata{maxCount: 1, truncateBefore: -1}

func (m streamMetadata) softDeleted() bool { return m.truncateBefore == deletedStream }

func isMetastream(name string) bool { return strings.HasPrefix(name, "$$") }

func metastreamOf(name string) string { return "$$" + name }

func originalOf(metastream string) string { return metastream[2:] }

// parseMetadata reads a metadata event's data the way the server does
// (StreamMetadata.TryFromJsonBytes): a JSON object whose $maxCount, $maxAge
// (seconds), $tb and $cacheControl are integers, $tempStream a boolean and
// $acl an object of role strings or arrays; other properties are skipped.
// Anything else (bad JSON, a wrong type, a number beyond int64, an $acl
// given as a string) makes the whole metadata empty, as on the server.
func parseMetadata(data []byte) streamMetadata {
	m, err := decodeMetadata(data)
	if err != nil {
		return emptyMetadata
	}
	return m
}

var errBadMetadata = errors.New("invalid stream metadata")

func decodeMetadata(data []byte) (streamMetadata, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := expectDelim(dec, '{'); err != nil {
		return streamMetadata{}, err
	}
	var maxCount, maxAge, tb int64 = 0, 0, -1
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return streamMetadata{}, err
		}
		name, _ := tok.(string)
		switch name {
		case "$maxCount", "$maxAge", "$tb", "$cacheControl":
			n, err := integerToken(dec)
			if err != nil {
				return streamMetadata{}, err
			}
			switch name {
			case "$maxCount":
				maxCount = n
			case "$maxAge":
				maxAge = n
			case "$tb":
				tb = n
			}
		case "$tempStream":
			tok, err := dec.Token()
			if err != nil {
				return streamMetadata{}, err
			}
			if _, ok := tok.(bool); !ok {
				return streamMetadata{}, errBadMetadata
			}
		case "$acl":
			if err := skipACL(dec); err != nil {
				return streamMetadata{}, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return streamMetadata{}, err
			}
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return streamMetadata{}, err
	}
	m := emptyMetadata
	if maxCount > 0 {
		m.maxCount = maxCount
	}
	if maxAge > 0 && maxAge <= math.MaxInt64/int64(time.Second) {
		m.maxAge = time.Duration(maxAge) * time.Second
	}
	if tb >= 0 {
		m.truncateBefore = tb
	}
	return m, nil
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return errBadMetadata
	}
	return nil
}

// integerToken reads a JSON integer that fits an int64 (a fraction or an
// exponent is not an integer token to Newtonsoft's reader).
func integerToken(dec *json.Decoder) (int64, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, err
	}
	num, ok := tok.(json.Number)
	if !ok || strings.ContainsAny(string(num), ".eE") {
		return 0, errBadMetadata
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		return 0, errBadMetadata
	}
	return n, nil
}

// skipACL checks an $acl object: its $r, $w, $d, $mr and $mw are a string
// or an array of strings. ACLs are not enforced (see the package doc), but
// a malformed one empties the metadata as on the server.
func skipACL(dec *json.Decoder) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case "$r", "$w", "$d", "$mr", "$mw":
		default:
			return errBadMetadata
		}
		tok, err = dec.Token()
		if err != nil {
			return err
		}
		if _, ok := tok.(string); ok {
			continue
		}
		if tok != json.Delim('[') {
			return errBadMetadata
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			if _, ok := tok.(string); !ok {
				return errBadMetadata
			}
		}
		if err := expectDelim(dec, ']'); err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

// withTruncateBefore rewrites raw metadata with $tb set to tb, keeping every
// other property, the way the server undeletes a soft-deleted stream
// (SoftUndeleteRawMeta); false when raw is not a JSON object.
func withTruncateBefore(raw []byte, tb int64) ([]byte, bool) {
	var props map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&props); err != nil || props == nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	props["$tb"] = json.RawMessage(strconv.FormatInt(tb, 10))
	out, err := json.Marshal(props)
	if err != nil {
		return nil, false
	}
	return out, true
}

// softDeleteMetadata is what a soft delete writes to the metastream: only
// $tb, at deletedStream (the stream's other metadata is not kept).
var softDeleteMetadata = []byte(fmt.Sprintf(`{"$tb":%d}`, int64(deletedStream)))
