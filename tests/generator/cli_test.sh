#!/bin/sh
# tsopt-gen rejects bad command lines with a clear message and a non-zero exit.
gen="$1"
fail=0
expect() {  # expect "message fragment" args...
  want="$1"; shift
  out=$("$gen" "$@" 2>&1); rc=$?
  if [ $rc -eq 0 ]; then echo "FAIL: '$*' exited 0"; fail=1; return; fi
  case "$out" in *"$want"*) echo "ok: $* -> $out" ;; *) echo "FAIL: '$*' printed: $out (wanted '$want')"; fail=1 ;; esac
}
expect "unknown operator 'bogus'" --ops ewadd,conv2d,bogus
expect "--max-ops must be within 1..6" --max-ops 9
expect "--max-ops must be within 1..6" --max-ops 0
expect "--max-ops expects an integer" --max-ops four
expect "cannot write '/nonexistent-dir/rules.txt'" --listing /nonexistent-dir/rules.txt --max-ops 1
expect "unknown option '--frobnicate'" --frobnicate
expect "--max-instances expects an integer" --max-instances many
expect "--rlimit must be within 0..2000000000" --rlimit -5
expect "--inputs: unknown input 'q'" --inputs x,q
expect "--inputs: input 'x' named twice" --inputs x,w,x
expect "--all-pairs-limit must be within" --all-pairs-limit 0
expect "--derive-effort must be within 0..1000000000" --derive-effort -1
expect "--derive-effort expects an integer" --derive-effort lots
expect "--shuffle-batch must be within 1..1000000000" --shuffle-batch 0
# --emit-derived with --header: derived rules enter the header, each naming
# the Z3-proven rules it came from; the summary and unproven listing are written.
# (Three operators: at two, every derived rule is a renamed copy of a proven one.)
dir=$(mktemp -d)
if "$gen" --max-ops 3 --threads 2 --ops ewadd,ewmul --inputs x,y --quiet --emit-derived --header "$dir/h.hpp" \
     --listing "$dir/r.txt" --summary "$dir/s.json" --unproven "$dir/u.txt"; then
  if grep -q "derived from rules [a-z]" "$dir/h.hpp" && grep -q "derived from rules [a-z]" "$dir/r.txt" &&
     [ -s "$dir/s.json" ] && [ -s "$dir/u.txt" ] && ! grep -q "all proven" "$dir/r.txt"; then
    echo "ok: --emit-derived --header"
  else echo "FAIL: --emit-derived --header: no derived provenance or a missing summary"; fail=1; fi
  ls "$dir" | grep -q tmp && { echo "FAIL: temporary files left behind: $(ls "$dir")"; fail=1; }
else echo "FAIL: --emit-derived --header exited non-zero"; fail=1; fi
rm -rf "$dir"
# --no-rederive: the same rules as a run that derives its Z3 non-proofs
# again, the listing's head saying those passes were skipped.
dir=$(mktemp -d)
small="--max-ops 2 --threads 2 --ops matmul,transpose,ewadd --quiet"
if "$gen" $small --listing "$dir/with.txt" && "$gen" $small --no-rederive --listing "$dir/without.txt"; then
  if [ "$(grep -v '^#' "$dir/with.txt")" = "$(grep -v '^#' "$dir/without.txt")" ] && grep -q "no derivation after Z3" "$dir/without.txt" &&
     ! grep -q "no derivation after Z3" "$dir/with.txt"; then echo "ok: --no-rederive: the same rules, said in the head"
  else echo "FAIL: --no-rederive changed the rules or did not say so"; fail=1; fi
else echo "FAIL: --no-rederive exited non-zero"; fail=1; fi
rm -rf "$dir"
out=$("$gen" --help) || { echo "FAIL: --help exited non-zero"; fail=1; }
case "$out" in *"usage: tsopt-gen"*) echo "ok: --help" ;; *) echo "FAIL: --help"; fail=1 ;; esac
exit $fail
