// Package canonicalbench measures runtime/canonical against generic baselines in the same run
// (issue 3, item 9): gowebpki/jcs, encoding/json/jsontext (with GOEXPERIMENT=jsonv2) and
// encoding/json. See RESULTS.md for the commands and the numbers.
package canonicalbench
