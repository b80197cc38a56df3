#!/bin/sh
# Proof outcomes depend on the inputs and options only (issue #23): the same
# small generation run twice, the second time beside a process that keeps a
# core busy, gives byte-identical listings and headers. Z3's deterministic
# limits decide every query; a query the wall clock would end aborts the run
# instead (checked last, with a 1 ms guard).
gen="$1"
dir=$(mktemp -d) || exit 1
burner=
cleanup() { [ -n "$burner" ] && kill "$burner" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
# matmul/smul/ewadd/transpose/avgpool/conv2d over an activation, a kernel,
# two matrices and the scalar: proofs (one through the transposed mirror),
# derivations and queries that end at the rlimit (avgpool over conv2d), in
# seconds.
args="--max-ops 2 --threads 2 --ops matmul,smul,ewadd,transpose,avgpool,conv2d --inputs x,w,a,b,s --quiet"
run() {  # run TAG
  "$gen" $args --listing "$dir/$1.txt" --header "$dir/$1.hpp" --summary "$dir/$1.json" --unproven "$dir/$1.unproven" ||
    { echo "FAIL: tsopt-gen exited $? ($1)"; exit 1; }
}
run idle
sh -c 'while :; do :; done' &
burner=$!
run busy
kill "$burner"; burner=
fail=0
for f in txt hpp unproven; do
  if cmp -s "$dir/idle.$f" "$dir/busy.$f"; then echo "ok: .$f identical with a core busy"
  else echo "FAIL: .$f differs with a core busy:"; diff "$dir/idle.$f" "$dir/busy.$f" | head -10; fail=1; fi
done
grep -q '"timeouts": [1-9]' "$dir/idle.json" || { echo "FAIL: no query ended at the rlimit (the test would prove nothing)"; fail=1; }
grep -q '"proven": [1-9]' "$dir/idle.json" || { echo "FAIL: nothing proven"; fail=1; }
# A 1 ms guard ends queries before their rlimit: the run aborts, naming why,
# and writes no rules rather than turning those queries into "unknown".
out=$("$gen" $args --timeout-ms 1 --rlimit 2000000000 --listing "$dir/guard.txt" 2>&1); rc=$?
if [ $rc -eq 0 ]; then echo "FAIL: a run whose queries hit the wall-clock guard exited 0"; fail=1
else case "$out" in *"wall-clock guard"*) echo "ok: wall-clock guard aborts the run (exit $rc)" ;;
  *) echo "FAIL: exit $rc without naming the wall-clock guard: $out"; fail=1 ;; esac; fi
[ -e "$dir/guard.txt" ] && { echo "FAIL: the aborted run wrote a listing"; fail=1; }
exit $fail
