package whatsapp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

const (
	mappingPrefix  = "lid-mapping-"
	mappingSuffix  = ".json"
	reverseSuffix  = "_reverse"
	maxMappingSize = 64 << 10
)

// safeID is the bridge identifier shape Hermes accepts in a mapping file
// name; anything else (a path separator, "..", spaces) is not an id.
var safeID = regexp.MustCompile(`^[A-Za-z0-9@.+\-]+$`)

// LoadAliases reads the bridge's mapping files in dir. The key of the result
// is the <id> of a file name (lid-mapping-<id>.json or
// lid-mapping-<id>_reverse.json), the value the JSON strings those files
// hold, the forward file's first; the strings are returned as written, not
// normalised. Files that cannot be read, do not hold a JSON string, or whose
// id fails ^[A-Za-z0-9@.+\-]+$ are skipped, as the bridge may be writing them
// while hermes reads. A missing dir yields an empty map and no error (a
// fresh bridge install has no mappings yet); any other failure to list dir
// is returned.
func LoadAliases(dir string) (map[string][]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string][]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load whatsapp aliases %s: %w", dir, err)
	}
	forward := map[string]string{}
	reverse := map[string]string{}
	for _, e := range entries {
		id, isReverse, ok := parseMappingName(e.Name())
		if !ok {
			continue
		}
		alias, ok := readMapping(filepath.Join(dir, e.Name()))
		if !ok {
			continue
		}
		if isReverse {
			reverse[id] = alias
		} else {
			forward[id] = alias
		}
	}
	out := make(map[string][]string, len(forward)+len(reverse))
	for id, alias := range forward {
		out[id] = append(out[id], alias)
	}
	for id, alias := range reverse {
		out[id] = append(out[id], alias)
	}
	return out, nil
}

// parseMappingName returns the id of a mapping file name and whether it is a
// reverse mapping. An id never contains "_", so the "_reverse" suffix cannot
// be part of one.
func parseMappingName(name string) (id string, isReverse, ok bool) {
	rest, ok := strings.CutPrefix(name, mappingPrefix)
	if !ok {
		return "", false, false
	}
	rest, ok = strings.CutSuffix(rest, mappingSuffix)
	if !ok {
		return "", false, false
	}
	id, isReverse = strings.CutSuffix(rest, reverseSuffix)
	if !safeID.MatchString(id) {
		return "", false, false
	}
	return id, isReverse, true
}

// readMapping returns the JSON string held by a mapping file. A mapping is a
// single JID, so anything larger than maxMappingSize is not one.
func readMapping(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return "", false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxMappingSize+1))
	if err != nil || len(data) > maxMappingSize {
		return "", false
	}
	var alias *string // a pointer, so that JSON null is told apart from ""
	if err := json.Unmarshal(data, &alias); err != nil || alias == nil {
		return "", false
	}
	return *alias, true
}
