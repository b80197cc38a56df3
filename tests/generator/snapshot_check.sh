#!/bin/sh
# Fails when the committed rule snapshot is stale: proven against another
# operator/axiom spec than the one built now (the spec hash in the header), or
# holding materially different rules than the build generated.
# Proofs are bounded by a wall-clock limit, so on a busier or slower machine a
# proof near the limit may time out (or succeed) where it did not when the
# snapshot was made: up to 2% of the rules may differ for that reason alone,
# which is reported but tolerated.
# usage: snapshot_check.sh BUILT_HEADER BUILT_LISTING SNAPSHOT_HEADER SNAPSHOT_LISTING
built_h=$1 built_l=$2 snap_h=$3 snap_l=$4
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
if [ "$diff" -eq 0 ]; then
  echo "rule snapshot current: $total rules, spec $sh"
  exit 0
fi
echo "rule snapshot and build differ by $diff rules ($only_built only built, $only_snap only in the snapshot) of $total"
comm -3 built.sorted snap.sorted | head -10
if [ $((diff * 50)) -gt "$total" ]; then
  echo "more than 2%: the generator changed; $refresh"
  exit 1
fi
echo "within the 2% attributed to proofs near the time limit"
exit 0
