#!/bin/sh
# Fails when the committed rule snapshot is stale: proven against another
# operator/axiom spec than the one built now (the spec hash in the header), or
# holding other rules than the build generated. The build bounds each proof
# by Z3's deterministic limits (gen_rlimit, gen_max_instances), so the proven
# set does not depend on --threads or machine load; the wall-clock hang guard
# beside them (60 s) ends no N=2 query, but if it ever ends one on an overloaded
# machine, a rule difference is tolerated only when this build's summary counts
# at least as many queries ended by that guard (wall_guard_hits), and reported
# as a warning.
# usage: snapshot_check.sh BUILT_HEADER BUILT_LISTING SNAPSHOT_HEADER SNAPSHOT_LISTING [BUILT_SUMMARY]
built_h=$1 built_l=$2 snap_h=$3 snap_l=$4 summary=${5:-}
hash_of() { sed -n 's/.*generated_spec_hash = "\([0-9a-f]*\)".*/\1/p' "$1"; }
bh=$(hash_of "$built_h"); sh=$(hash_of "$snap_h")
refresh="refresh: cp <build>/rules/generated_rules.hpp <build>/rules/rules.txt include/tsopt/rules/"
if [ -z "$bh" ] || [ "$bh" != "$sh" ]; then
  echo "stale rule snapshot: proven against spec $sh, the spec now hashes to $bh"
  echo "$refresh"
  exit 1
fi
rules() { grep -v '^#' "$1" | grep -v '^[[:space:]]*$' | sort; }
rules "$built_l" > built.sorted; rules "$snap_l" > snap.sorted
only_built=$(comm -23 built.sorted snap.sorted | wc -l)
only_snap=$(comm -13 built.sorted snap.sorted | wc -l)
total=$(wc -l < snap.sorted)
diff=$((only_built + only_snap))
if [ "$diff" -eq 0 ] && cmp -s "$built_h" "$snap_h"; then
  echo "rule snapshot current: $total rules, spec $sh"
  exit 0
fi
guard_hits=0
if [ -n "$summary" ] && [ -f "$summary" ]; then
  guard_hits=$(sed -n 's/.*"wall_guard_hits": *\([0-9]*\).*/\1/p' "$summary" | head -1)
  guard_hits=${guard_hits:-0}
fi
if [ "$diff" -gt 0 ] && [ "$diff" -le "$guard_hits" ]; then
  echo "warning: rule snapshot and build differ by $diff rules of $total; this build had $guard_hits"
  echo "queries ended by the wall-clock guard (a loaded machine), which can explain them:"
  comm -3 built.sorted snap.sorted | head -10
  exit 0
fi
if [ "$diff" -eq 0 ]; then
  echo "rule snapshot holds the built rules but its header differs (generator options or format changed)"
  diff "$snap_h" "$built_h" | head -10
else
  echo "rule snapshot and build differ by $diff rules ($only_built only built, $only_snap only in the snapshot) of $total"
  comm -3 built.sorted snap.sorted | head -10
fi
echo "$refresh"
exit 1
