#!/bin/sh
# bench/taso_rule_coverage on equations written in TASO's rule syntax
# (Tensat's taso_rules.txt / multi_rules.txt spelling; these are written for
# the test, not copied): renamed copies are one class, a false equation is
# caught by evaluation instead of counted, the two-output pair is read as
# one rule, and the true equations are joined by the built-in rules.
#   usage: taso_rule_coverage_test.sh TASO_RULE_COVERAGE SAMPLE MULTI_SAMPLE
set -eu
tool=$1 sample=$2 multi=$3
out=$("$tool" "$sample" --multi "$multi" --missing 10 2>/dev/null)
echo "$out"
expect() {
  printf '%s\n' "$out" | grep -q -F -- "$1" || { echo "FAIL: the report lacks '$1'"; exit 1; }
}
expect "TASO equations: 6 in"
expect "1 two-output rules, 0 single equations"
# matmul-assoc twice (renamed) is one class: 6 distinct of 7 rules.
expect "distinct up to renaming and direction: 6"
expect "1 of the 6 classes compute different values"
expect "matmul(input_1,input_4) == matmul(input_1,input_5)"
expect "of 5 distinct TASO rules tsopt builds and finds true"
expect "not joined within 2: 0"
# A file tsopt cannot read is refused by name, not half-read.
bad=$(mktemp)
trap 'rm -f "$bad"' EXIT
printf 'matmul(input_1,input_4)==matmul(input_1' > "$bad"
if "$tool" "$bad" >/dev/null 2>&1; then echo "FAIL: a truncated file was accepted"; exit 1; fi
"$tool" "$bad" 2>&1 | grep -q "expected" || { echo "FAIL: no parse error named"; exit 1; }
echo "taso_rule_coverage_test: ok"
