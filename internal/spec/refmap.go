package spec

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// RefMap maps remote $ref targets to local copies, so that a spec whose $refs name URLs can be
// read without the network (idemgen never loads over it): an exact URL maps to a file, a URL
// prefix ending in "/" to a folder, under which the rest of the URL's path is looked up. The
// longest matching prefix wins. Its zero value maps nothing.
type RefMap struct {
	entries []refEntry
}

type refEntry struct {
	remote string // without a fragment
	local  string
}

// ParseRefMap reads --ref-map values, each URL=FILE (or URL/=FOLDER).
func ParseRefMap(values []string) (RefMap, error) {
	var m RefMap
	for _, v := range values {
		remote, local, ok := strings.Cut(v, "=")
		if !ok || local == "" {
			return RefMap{}, fmt.Errorf("--ref-map %q: want URL=FILE (or a URL prefix ending in / = FOLDER)", v)
		}
		if err := m.Add(remote, local); err != nil {
			return RefMap{}, fmt.Errorf("--ref-map %q: %w", v, err)
		}
	}
	return m, nil
}

// Add maps remote (an http or https URL, or a prefix of one ending in "/") to local. A later
// mapping of the same URL replaces the earlier.
func (m *RefMap) Add(remote, local string) error {
	u, err := url.Parse(remote)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http or https URL", remote)
	}
	if u.Fragment != "" {
		return fmt.Errorf("%q has a fragment; map the document, and the $ref's fragment is looked up in the copy", remote)
	}
	m.entries = slices.DeleteFunc(m.entries, func(e refEntry) bool { return e.remote == remote })
	m.entries = append(m.entries, refEntry{remote: remote, local: local})
	slices.SortStableFunc(m.entries, func(a, b refEntry) int { return cmp.Compare(len(b.remote), len(a.remote)) })
	return nil
}

// Merge adds every mapping of o, which wins over m's for the same URL.
func (m RefMap) Merge(o RefMap) RefMap {
	out := RefMap{entries: slices.Clone(m.entries)}
	for _, e := range slices.Backward(o.entries) {
		_ = out.Add(e.remote, e.local) // already checked
	}
	return out
}

// Local is the local file that stands for the remote document u (its fragment ignored).
func (m RefMap) Local(u *url.URL) (string, bool) {
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	c := *u
	c.Fragment, c.RawFragment = "", ""
	s := c.String()
	for _, e := range m.entries {
		switch {
		case s == e.remote:
			return e.local, true
		case strings.HasSuffix(e.remote, "/") && strings.HasPrefix(s, e.remote):
			rest, err := url.PathUnescape(strings.TrimPrefix(s, e.remote))
			if err != nil || strings.Contains("/"+rest+"/", "/../") {
				return "", false
			}
			return strings.TrimSuffix(e.local, "/") + "/" + rest, true
		}
	}
	return "", false
}

// Len is the number of mappings.
func (m RefMap) Len() int { return len(m.entries) }
