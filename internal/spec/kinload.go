package spec

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"
)

// decodeOnce parses the root document a single time and has kin-openapi decode its types from
// that node tree, which the locator then keeps for line numbers. kin-openapi's own entry point
// (LoadFromDataWithPath) parses the same YAML internally and would throw the tree away, so
// locating anything would cost a second parse (or IncludeOrigin, about 70% more on Stripe).
//
// Before decoding, the tree gets the same normalisation kin-openapi applies (prepare). A document
// using YAML aliases, or one the YAML parser refuses (JSON with duplicate keys, which kin-openapi
// reads through encoding/json instead), goes through kin-openapi's own path: it loads exactly as
// kin-openapi loads it, only without positions.
//
// tree, when not nil, is the document already parsed (and overlaid); data is then unused.
func decodeOnce(loader *openapi3.Loader, data []byte, tree *yaml.Node, location *url.URL) (*openapi3.T, *yaml.Node, error) {
	root := tree
	if root == nil {
		root = &yaml.Node{}
		if err := yaml.Unmarshal(data, root); err != nil {
			doc, err := loader.LoadFromDataWithPath(data, location)
			return doc, nil, err
		}
	}
	if hasAlias(root) {
		if tree != nil {
			var err error
			if data, err = yaml.Marshal(tree); err != nil {
				return nil, nil, err
			}
		}
		doc, err := loader.LoadFromDataWithPath(data, location)
		return doc, nil, err
	}
	if err := prepare(root); err != nil {
		return nil, nil, err
	}
	doc := &openapi3.T{}
	if err := root.Decode(doc); err != nil {
		return nil, nil, err
	}
	if err := loader.ResolveRefsIn(doc, location); err != nil {
		return nil, nil, err
	}
	top := root
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		top = root.Content[0]
	}
	return doc, top, nil
}

func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}

// prepare normalises scalars the way an OpenAPI document means them (JSON's data model): a
// mapping key is always a string (YAML reads `200:` as an integer), a date-shaped scalar stays
// the text it is, an application tag is ignored, and infinities and NaN, which JSON cannot
// represent, are refused with their line.
func prepare(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		switch {
		case n.Tag == "!!timestamp" || (strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!")):
			n.Tag = "!!str"
		case n.ShortTag() == "!!float":
			switch strings.ToLower(strings.TrimLeft(n.Value, "+-")) {
			case ".inf", ".nan":
				return fmt.Errorf("line %d: %s has no JSON representation", n.Line, n.Value)
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				continue
			}
			if k.ShortTag() == "!!null" {
				return fmt.Errorf("line %d: a mapping key is null, so it names nothing", k.Line)
			}
			if k.ShortTag() != "!!str" {
				k.Tag = "!!str"
			}
		}
	}
	for _, c := range n.Content {
		if err := prepare(c); err != nil {
			return err
		}
	}
	return nil
}
