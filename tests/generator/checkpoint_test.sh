#!/bin/sh
# --checkpoint (issue #22): a run killed during verification and started
# again with the same checkpoint resumes after the chunks it holds (and the
# final derivation pass, or the slices of it done), without enumerating and pairing again
# (FILE.candidates), and ends with the listing
# and header of an uninterrupted run; so does one over MPI ranks (when
# tsopt-gen-mpi is given), and one killed between two fingerprint
# partitions; so does one under --reuse-solver whose solvers restart every
# few chunks (--solver-restart), killed after a chunk where they restart. A
# checkpoint from other options (for a reused solver: another thread count),
# a corrupt one (of either file), and --reuse-solver with --solver-restart 0
# are refused by name.
# usage: checkpoint_test.sh TSOPT_GEN [TSOPT_GEN_MPI MPIRUN]
gen="$1"; genmpi="$2"; mpirun="$3"
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi_asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"  # as in mpi_test.sh
args="--max-ops 2 --ops matmul,smul,ewadd,transpose,avgpool,conv2d --inputs x,w,a,b,s --threads 1 --quiet"
fail=0
"$gen" $args --listing "$dir/ref.txt" --header "$dir/ref.hpp" || { echo "FAIL: uninterrupted run exited $?"; exit 1; }
# kill_after_checkpoint CK SIGNAL CMD...: runs CMD, kills it once CK exists.
kill_after_checkpoint() {
  ck=$1; sig=$2; shift 2
  "$@" &
  pid=$!
  n=0
  while [ ! -s "$ck" ] && kill -0 $pid 2>/dev/null && [ $n -lt 6000 ]; do sleep 0.01; n=$((n + 1)); done
  kill -"$sig" $pid 2>/dev/null
  wait $pid
  rc=$?
  [ -s "$ck" ] || { echo "FAIL: no checkpoint was written before the run ended"; exit 1; }
  [ $rc -ne 0 ] || { echo "FAIL: the run ended (exit 0) before it was killed: the test would prove nothing"; exit 1; }
}
same_as_ref() {  # same_as_ref TAG WHAT
  for f in txt hpp; do
    if cmp -s "$dir/ref.$f" "$dir/$1.$f"; then echo "ok: .$f identical: $2"
    else echo "FAIL: .$f differs: $2"; diff "$dir/ref.$f" "$dir/$1.$f" | head -10; fail=1; fi
  done
}
resumed() {  # resumed TAG WHAT: the resumed run's output equals the uninterrupted one
  grep -q '"resumed_candidates": [1-9]' "$dir/$1.json" || { echo "FAIL: $2: the summary does not say it resumed"; fail=1; }
  grep -q '"resumed_partitions": 1' "$dir/$1.json" || { echo "FAIL: $2: the candidates were enumerated again"; fail=1; }
  same_as_ref "$1" "$2"
}
kill_after_checkpoint "$dir/one.ck" 9 "$gen" $args --checkpoint "$dir/one.ck" --checkpoint-every-s 0 --listing "$dir/killed.txt"
[ -e "$dir/killed.txt" ] && { echo "FAIL: the killed run wrote a listing"; fail=1; }
"$gen" $args --checkpoint "$dir/one.ck" --listing "$dir/one.txt" --header "$dir/one.hpp" --summary "$dir/one.json" ||
  { echo "FAIL: the resumed run exited $?"; exit 1; }
resumed one "tsopt-gen killed (SIGKILL) after a checkpoint, then resumed"
# That run finished: its checkpoint holds the final derivation pass too.
"$gen" $args --checkpoint "$dir/one.ck" --listing "$dir/again.txt" --header "$dir/again.hpp" --summary "$dir/again.json" ||
  { echo "FAIL: the run from a finished checkpoint exited $?"; exit 1; }
grep -q '"resumed_final_pass": true' "$dir/again.json" || { echo "FAIL: the final derivation pass was not taken from the checkpoint"; fail=1; }
same_as_ref again "a run from a finished checkpoint (final derivation pass resumed)"
# Refusals, each naming the problem.
expect_error() {  # expect_error WHAT PATTERN CMD...
  what=$1; pat=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ]; then echo "FAIL: $what: exit 0"; fail=1
  else case "$out" in *"$pat"*) echo "ok: $what refused (exit $rc)" ;;
    *) echo "FAIL: $what: exit $rc without '$pat': $out"; fail=1 ;; esac; fi
}
expect_error "a checkpoint of other options" "written by another run" "$gen" $args --seed 5 --checkpoint "$dir/one.ck"
head -c 100 "$dir/one.ck" > "$dir/cut.ck"
expect_error "a truncated checkpoint" "--checkpoint $dir/cut.ck" "$gen" $args --checkpoint "$dir/cut.ck"
expect_error "--reuse-solver with --solver-restart 0" "drop --solver-restart 0" "$gen" $args --reuse-solver --solver-restart 0 --checkpoint "$dir/r0.ck"
expect_error "--solver-restart without --reuse-solver" "only with --reuse-solver" "$gen" $args --solver-restart 4
head -c 300 "$dir/one.ck.candidates" > "$dir/cutc.ck.candidates"
expect_error "a truncated candidates checkpoint" "--checkpoint $dir/cutc.ck.candidates" "$gen" $args --checkpoint "$dir/cutc.ck"
# Killed inside the final derivation pass (after the checkpoint of its first
# slice of --derive-chunk positions; the test hook ends the process as
# SIGKILL would, since the pass is over in milliseconds here): the resumed run
# takes the slices the file holds and derives only the rest.
fargs="$args --derive-chunk 2"
"$gen" $fargs --listing "$dir/fref.txt" --header "$dir/fref.hpp" --summary "$dir/fref.json" ||
  { echo "FAIL: uninterrupted --derive-chunk 2 run exited $?"; exit 1; }
TSOPT_GEN_TEST_KILL_AFTER_FINAL_SLICES=1 "$gen" $fargs --checkpoint "$dir/f.ck" --checkpoint-every-s 0 --listing "$dir/fkilled.txt"
rc=$?
[ $rc -eq 137 ] || { echo "FAIL: the run to be killed inside the final derivation pass exited $rc"; fail=1; }
[ -e "$dir/fkilled.txt" ] && { echo "FAIL: the run killed inside the final pass wrote a listing"; fail=1; }
"$gen" $fargs --checkpoint "$dir/f.ck" --listing "$dir/f.txt" --header "$dir/f.hpp" --summary "$dir/f.json" ||
  { echo "FAIL: the run resumed inside the final pass exited $?"; exit 1; }
grep -q '"resumed_final_positions": [1-9]' "$dir/f.json" && grep -q '"resumed_final_pass": false' "$dir/f.json" ||
  { echo "FAIL: the summary does not say the final pass was resumed part way"; fail=1; }
for f in txt hpp; do
  if cmp -s "$dir/fref.$f" "$dir/f.$f"; then echo "ok: .$f identical: killed inside the final derivation pass, then resumed"
  else echo "FAIL: .$f differs after resuming inside the final derivation pass"; diff "$dir/fref.$f" "$dir/f.$f" | head -10; fail=1; fi
done
# --reuse-solver: a solver's verdicts depend on the queries it answered
# since it started, so with --solver-restart 2 (chunks of 2 candidates) the
# checkpoints are written only every 4 candidates, where every solver starts
# afresh, and a run resumed there asks its solvers what the uninterrupted
# run's were asked since then.
rargs="$args --reuse-solver --solver-restart 2 --derive-chunk 2"
"$gen" $rargs --listing "$dir/rref.txt" --header "$dir/rref.hpp" || { echo "FAIL: uninterrupted --reuse-solver run exited $?"; exit 1; }
kill_after_checkpoint "$dir/r.ck" 9 "$gen" $rargs --checkpoint "$dir/r.ck" --checkpoint-every-s 0 --listing "$dir/rkilled.txt"
"$gen" $rargs --checkpoint "$dir/r.ck" --listing "$dir/r.txt" --header "$dir/r.hpp" --summary "$dir/r.json" ||
  { echo "FAIL: the resumed --reuse-solver run exited $?"; exit 1; }
at=$(sed -n 's/^ *"resumed_candidates": \([0-9]*\),*$/\1/p' "$dir/r.json")
case "$at" in
  ""|0) echo "FAIL: --reuse-solver: the summary does not say it resumed"; fail=1 ;;
  *) if [ $((at % 4)) -ne 0 ] && ! grep -q '"resumed_final_pass": true' "$dir/r.json"; then
       echo "FAIL: --reuse-solver: resumed at candidate $at, where the solvers do not restart"; fail=1
     else echo "ok: --reuse-solver: resumed at candidate $at"; fi ;;
esac
for f in txt hpp; do
  if cmp -s "$dir/rref.$f" "$dir/r.$f"; then echo "ok: .$f identical: --reuse-solver --solver-restart 2 killed after a checkpoint, then resumed"
  else echo "FAIL: .$f differs after resuming a --reuse-solver run"; diff "$dir/rref.$f" "$dir/r.$f" | head -10; fail=1; fi
done
expect_error "a --reuse-solver checkpoint resumed with another thread count" "written by another run" \
  "$gen" $rargs --threads 2 --checkpoint "$dir/r.ck"
# Killed once the first of 4 fingerprint partitions is paired (the
# verification checkpoint may not exist yet): the resumed run pairs only the
# partitions after those the file holds.
kill_after_checkpoint "$dir/p.ck.candidates" 9 "$gen" $args --partitions 4 --checkpoint "$dir/p.ck" --listing "$dir/pkilled.txt"
"$gen" $args --partitions 4 --checkpoint "$dir/p.ck" --listing "$dir/p.txt" --header "$dir/p.hpp" --summary "$dir/p.json" ||
  { echo "FAIL: the run resumed between partitions exited $?"; exit 1; }
grep -q '"resumed_partitions": [1-4]' "$dir/p.json" || { echo "FAIL: --partitions 4: the summary does not say partitions were resumed"; fail=1; }
same_as_ref p "tsopt-gen --partitions 4 killed (SIGKILL) after a partition, then resumed"
if [ -n "$genmpi" ]; then
  kill_after_checkpoint "$dir/mpi.ck" TERM env ASAN_OPTIONS="$mpi_asan" "$mpirun" --oversubscribe -np 2 "$genmpi" $args \
    --checkpoint "$dir/mpi.ck" --checkpoint-every-s 0
  ASAN_OPTIONS="$mpi_asan" timeout 600 "$mpirun" --oversubscribe -np 2 "$genmpi" $args --checkpoint "$dir/mpi.ck" \
    --listing "$dir/mpi.txt" --header "$dir/mpi.hpp" --summary "$dir/mpi.json" || { echo "FAIL: the resumed MPI run exited $?"; exit 1; }
  resumed mpi "mpirun -np 2 tsopt-gen-mpi stopped (SIGTERM to mpirun) after a checkpoint, then resumed"
fi
exit $fail
