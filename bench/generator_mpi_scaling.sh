#!/bin/sh
# tsopt-gen over MPI ranks (issue #22): the same generation at 1, 2 and 4
# ranks (more ranks than cores are oversubscribed) and tsopt-gen in one
# process with 1 thread, run one after the other on this machine; prints per
# run the phases, the wall time, the speed-up over one process and the
# per-rank verification and enumeration seconds (slowest against the mean),
# first-pass candidates, shuffle seconds and bytes sent, and peak memory,
# and checks that
# every listing and header equals the single-process one.
#   bench/generator_mpi_scaling.sh [BUILD_DIR] [RANKS] [tsopt-gen options...]
# e.g. bench/generator_mpi_scaling.sh build "1 2" --max-ops 3 --representative-params \
#        --distinct-operands --distinct-values --all-pairs-limit 1           (the build's N=3)
#      bench/generator_mpi_scaling.sh build "1 2 4" --max-ops 4 --representative-params \
#        --distinct-operands --distinct-values --all-pairs-limit 1 --inputs x,w,v,a,b,s \
#        --timeout-ms 600000 --rlimit 10000 --max-instances 3000              (N=4)
set -u
build=${1:-build}; ranks=${2:-"1 2 4"}
[ $# -ge 2 ] && shift 2 || shift $#
gen="$build/generator/tsopt-gen"; genmpi="$build/generator/tsopt-gen-mpi"
[ -x "$genmpi" ] || { echo "no $genmpi: build with MPI (apt install libopenmpi-dev openmpi-bin; meson option mpi)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
out=$(mktemp -d)
now() { date +%s.%N; }
phases() {  # the summary's phase seconds, "name s" per phase
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join("%s %.1f" % (p["name"], p["seconds"]) for p in d["phases"]))' "$1"
}
echo "cores: $(nproc); options: $*"
t0=$(now)
"$gen" --threads 1 "$@" --listing "$out/one.txt" --header "$out/one.hpp" --summary "$out/one.json" 2> "$out/one.err" ||
  { echo "tsopt-gen failed:"; tail -5 "$out/one.err"; exit 1; }
base=$(echo "$(now) - $t0" | bc)
printf '%-28s %8.1f s  1.00x  %s\n' "tsopt-gen, 1 thread" "$base" "$(phases "$out/one.json")"
status=0
for np in $ranks; do
  t0=$(now)
  mpirun --oversubscribe -np "$np" "$genmpi" "$@" --listing "$out/r$np.txt" --header "$out/r$np.hpp" --summary "$out/r$np.json" \
    2> "$out/r$np.err" || { echo "mpirun -np $np failed:"; tail -5 "$out/r$np.err"; status=1; continue; }
  wall=$(echo "$(now) - $t0" | bc)
  per=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
def line(s):
    m = sum(s) / len(s) if s else 0
    return " ".join("%.1f" % x for x in s) + " (slowest %.2fx the mean)" % (max(s) / m if m else 1)
first = d.get("process_first_pass_candidates") or []
print("verification", line(d["process_seconds"]) if d["process_seconds"] else "-", "| enumeration", line(d["process_enumerate_seconds"]),
      "| first-pass candidates", " ".join(map(str, first)) or "-",
      "| shuffle s", " ".join("%.1f" % x for x in d.get("process_shuffle_seconds", [])) or "-",
      "| shuffle MiB sent", " ".join("%.0f" % (x / 2**20) for x in d.get("process_shuffle_bytes", [])) or "-",
      "| peak MiB", " ".join("%.0f" % x for x in d.get("process_peak_mib", [])) or "-")' "$out/r$np.json")
  same=identical
  cmp -s "$out/one.txt" "$out/r$np.txt" && cmp -s "$out/one.hpp" "$out/r$np.hpp" || { same="DIFFERENT"; status=1; }
  printf '%-28s %8.1f s  %.2fx  %s; rules %s; per-rank s: %s\n' "tsopt-gen-mpi, $np rank(s)" "$wall" \
    "$(echo "$base / $wall" | bc -l)" "$(phases "$out/r$np.json")" "$same" "$per"
done
echo "outputs: $out"
exit $status
