#!/usr/bin/env bash
# `report` end to end (the CLI, every format), two builds side by side: each is run ROUNDS times,
# alternating which goes first, and /usr/bin/time's wall, user and system seconds are printed per
# run. On a machine shared with other jobs the CPU seconds (user + system) are the steadier measure.
#   bash bench/report-cli.sh AUDIT_DIR OLD_CHECKOUT NEW_CHECKOUT [ROUNDS]
# AUDIT_DIR: e.g. the paper-size audit that `npx tsx bench/report-paper.ts --keep DIR` leaves under
# DIR/audit/audits/<id>; each checkout must hold a built dist/ (npm run build).
set -euo pipefail
audit=$1 old=$2 new=$3 rounds=${4:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {
  local name=$1 dir=$2
  /usr/bin/time -f "$name wall %e s user %U s sys %S s maxrss %M kB" node "$dir/dist/cli/main.js" report "$audit" --out "$out/$name" >/dev/null 2>"$out/$name.err" || { cat "$out/$name.err" >&2; exit 1; }
  tail -1 "$out/$name.err"
}
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then run old "$old"; run new "$new"; else run new "$new"; run old "$old"; fi
done
cmp <(jq -S 'walk(if type == "object" then del(.provenance) else . end)' "$out/old/summary.json") <(jq -S 'walk(if type == "object" then del(.provenance) else . end)' "$out/new/summary.json") && echo "summary.json identical (provenance aside)"
