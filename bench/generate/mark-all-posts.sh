#!/bin/sh
# mark-all-posts.sh SPEC.yaml > config.yaml
#
# Writes an idemgen config file (version 1) that marks every POST operation of a YAML OpenAPI
# document by "POST /path", using the document's own layout (paths at two spaces, methods at
# four), which is how Stripe's spec3.yaml is written. Used by run.sh for the generation
# benchmark on stripe-spec3.yaml.
set -eu
printf 'version: 1\noperations:\n'
awk '
  /^paths:/ { inpaths = 1; next }
  inpaths && /^[^ ]/ { inpaths = 0 }
  inpaths && /^  [^ ].*:$/ { p = $0; sub(/^  /, "", p); sub(/:$/, "", p); gsub(/"/, "", p); gsub(/'\''/, "", p); next }
  inpaths && /^    post:/ { printf "  \"POST %s\": true\n", p }
' "$1"
