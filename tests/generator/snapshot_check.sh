#!/bin/sh
# Fails when the committed rule snapshot is stale: proven against another
# operator/axiom spec than the one built now (the spec hash in the header), or
# holding other rules, or another header, than the build generated. The build
# bounds each proof by Z3's deterministic limits (gen_rlimit,
# gen_max_instances) and aborts if its wall-clock hang guard ever ends a
# query, so the output depends on neither --threads nor machine load: the
# match must be exact.
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
if [ "$diff" -eq 0 ]; then
  echo "rule snapshot holds the built rules but its header differs (generator options or format changed)"
  diff "$snap_h" "$built_h" | head -10
else
  echo "rule snapshot and build differ by $diff rules ($only_built only built, $only_snap only in the snapshot) of $total"
  comm -3 built.sorted snap.sorted | head -10
fi
echo "$refresh"
exit 1
