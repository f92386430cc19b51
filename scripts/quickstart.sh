#!/usr/bin/env bash
# quickstart.sh — what `make quickstart` runs: the README's "Five minutes" commands, as written
# there, in a fresh module beside this checkout.
#
# It makes a temporary folder holding `idemgen` (a link to this checkout) and `shop`, a new
# module with the petstore spec and a main.go that carries step 3's go:generate line and
# already imports the package it generates (the case where a plain `go mod tidy` stops). It then
# runs README.md's step 2 block and step 3's commands, copied from the README itself, so the
# README cannot drift from what works. It needs the Go module proxy (or a warm module cache).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

# block START: the first fenced block after the line that starts with START, without its fences.
block() {
  awk -v start="$1" '
    index($0, start) == 1 { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    found && inside { print }
  ' README.md
}
step2=$(block '**2. Check what you marked.**')
generate=$(block '**3. Generate.**')
build=$(block 'then, with the package generated')
for b in step2 generate build; do
  if [ -z "${!b}" ]; then
    echo "quickstart: README.md has no $b block where this script looks for it; did its form change?" >&2
    exit 1
  fi
done

tmp=$(mktemp -d /tmp/idemgen-quickstart.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ln -s "$repo" "$tmp/idemgen"
mkdir "$tmp/shop"
cp examples/petstore/petstore.yaml "$tmp/shop/"
cat >"$tmp/shop/main.go" <<GO
package main

$generate

import (
	"fmt"

	"example.com/shop/api"
)

func main() { fmt.Println(len(api.Operations()), "idempotent operations") }
GO

cd "$tmp/shop"
go mod init example.com/shop
echo "== step 2, as README.md writes it"
echo "$step2"
bash -euo pipefail -c "$step2"
echo "== step 3, as README.md writes it"
echo "$build"
bash -euo pipefail -c "$build"
go run .
echo "quickstart: README.md's steps 2 and 3 work from a fresh module"
