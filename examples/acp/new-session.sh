#!/bin/sh
# new-session.sh: creates a checkout session on the running merchant and prints its id, one per
# call: the command for idemgen conform's --fresh-param checkout_session_id=... (complete and
# cancel close the session they are sent to, so each key needs a session of its own;
# docs/conform.md). ACP_URL is the merchant (default http://127.0.0.1:8080), ACP_TOKEN the
# caller's bearer token (default agent-a, conform's --header). Needs curl.
set -eu
url=${ACP_URL:-http://127.0.0.1:8080}
curl -fsS -X POST "$url/checkout_sessions" \
  -H "Authorization: Bearer ${ACP_TOKEN:-agent-a}" \
  -H "Idempotency-Key: new-session-$(date +%s%N)-$$" \
  -H 'API-Version: 2026-04-17' -H 'Content-Type: application/json' \
  -d '{"line_items":[{"id":"item_1"}],"currency":"usd","capabilities":{}}' |
  grep -o '"id" *: *"cs_[^"]*"' | head -n 1 | sed 's/.*"\(cs_[^"]*\)"$/\1/'
