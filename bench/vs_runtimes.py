#!/usr/bin/env python3
"""tsopt against the runtimes users already have, side by side in one run.

For each model in the folder (ONNX exported from PyTorch by
bench/export_models.py, and tsopt's zoo models written by build/bench/export_zoo
as zoo_<name>.onnx) and each thread count: `tsopt optimize` once, then R interleaved rounds of

  tsopt (oneDNN) on the original and on its optimized model  (`tsopt bench M`, each),
  ONNX Runtime (ORT_ENABLE_ALL) on the original and on tsopt's output,
  OpenVINO (CPU, LATENCY hint, f32 inference precision) on the original,

each round the median of K runs (the two runs of each pair swap places every
other round), the table the median over rounds. Ratios
are other / tsopt-optimized (above 1: tsopt is faster). Outputs are checked:
ONNX Runtime on tsopt's model against ONNX Runtime on the original, same
random inputs, every graph input fed by name, and tsopt's own executor on the
original against its reference executor (`tsopt optimize`'s report,
verification.device) (`agree`: both max relative errors <= 1e-4); OpenVINO's outputs
against ONNX Runtime's on the original are shown beside them (`OpenVINO
error`), so a runtime that computed something else is not counted as fast.
With --core-probe (vs_runtimes.sh passes build/bench/core_round_trip), each
round of two or more threads also records the round trip of a cache line
between the first two CPUs (`core round trip ns`, one figure per round): the
host moves this project's two vCPUs between cores sharing a last-level cache
(about 55 ns) and cores that do not (about 330 ns), and every runtime's
2-thread times move with it.
A row whose `tsopt optimize` spent its --budget before timing the candidates
(its report's timing_rounds 0: the cost model's choice was written untimed)
shows "(pick untimed)" beside its optimize time, and the summary counts them.
A row where tsopt kept the original graph (its report's kept_original: no
candidate was faster end to end) shows "(same graph)" beside ORT's gain:
ORT then runs one graph twice, and the ratio is the timing's noise; the
summary counts ORT's gains of at least 0.98x over the rows tsopt changed.

  bench/vs_runtimes.sh [options]      (creates the virtual environment, then runs this)
  python bench/vs_runtimes.py --models DIR [--only a,b] [--threads 1,2] [--rounds 5] [--reps 10]
                              [--budget 60] [--tsopt build/tools/tsopt/tsopt] [--markdown FILE]
                              [--denormals defaults|flushed|kept]

Denormal floats: by default each runtime runs as it does out of the box (tsopt
flushes them to zero, ONNX Runtime and OpenVINO do not); --denormals flushed or
kept runs all three the same way.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import openvino as ov


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def ort_session(path, threads, flush_denormals):
    so = ort.SessionOptions()
    if flush_denormals:
        so.add_session_config_entry("session.set_denormal_as_zero", "1")
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def median_ms(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def rel_error(a, b):
    err = 0.0
    for x, y in zip(a, b):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.shape != y.shape:
            return float("inf")
        scale = max(float(np.max(np.abs(y))), 1e-30)
        err = max(err, float(np.max(np.abs(x - y))) / scale)
    return err


TSOPT_LINE = re.compile(r"^\s+(\S+)\s+([0-9.]+) ms")


def tsopt_bench(tsopt, model, threads, reps, keep_denormals):
    """Median ms of `reps` runs of one model in a row (`tsopt bench MODEL`), as the runtimes below are timed.

    `tsopt bench A B` alternates the two models run by run: each run then starts after the other
    model's weights went through the caches, which the runtimes' back-to-back runs never see."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run([tsopt, "bench", str(model), "--reps", str(reps), *(["--keep-denormals"] if keep_denormals else [])],
                       env=env, capture_output=True, text=True)
    times = [float(m.group(2)) for m in map(TSOPT_LINE.match, r.stdout.splitlines()) if m]
    if r.returncode != 0 or len(times) != 1:
        raise RuntimeError(f"tsopt bench exited {r.returncode}: {(r.stderr or r.stdout).strip()[-400:]}")
    return times[0]


CORE_LINE = re.compile(r"core round trip: ([0-9.]+) ns")


def core_round_trip(probe):
    """The two CPUs' cache-line round trip in ns (bench/core_round_trip.cpp), or None without a probe."""
    if not probe:
        return None
    r = subprocess.run([probe], capture_output=True, text=True)
    m = CORE_LINE.search(r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"core_round_trip exited {r.returncode}: {(r.stderr or r.stdout).strip()[-400:]}")
    return float(m.group(1))


def run_model(args, name, path, threads, work):
    opt = work / f"{name}.t{threads}.tsopt.onnx"
    report = work / f"{name}.t{threads}.report.json"
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    keep_denormals = args.denormals == "kept"
    t0 = time.perf_counter()
    r = subprocess.run([args.tsopt, "optimize", str(path), "-o", str(opt), "--budget", str(args.budget), "--report", str(report),
                        *(["--keep-denormals"] if keep_denormals else [])],
                       env=env, capture_output=True, text=True)
    search_s = time.perf_counter() - t0
    row = {"model": name, "threads": threads, "optimize_exit": r.returncode, "optimize_s": round(search_s, 1)}
    if r.returncode != 0:
        row["error"] = (r.stderr or r.stdout).strip().splitlines()[-1:]
        log(f"  {name} t={threads}: tsopt optimize exited {r.returncode}: {row['error']}")
        return row
    # 0 when --budget left no time to time the candidates: the cost model's choice was written.
    rep = json.loads(report.read_text())
    row["timing_rounds"] = rep.get("timing_rounds")
    # tsopt wrote the original graph (no candidate was faster end to end):
    # ORT on its output runs the same graph as ORT on the original, so their
    # ratio is the noise of timing one graph twice.
    row["same_graph"] = bool(rep.get("kept_original"))
    # tsopt's own executor on the original against its reference executor,
    # same inputs (null when nothing was timed): a wrong computation is not
    # counted as fast.
    device = rep.get("verification", {}).get("device") or {}
    row["device_error"] = device.get("original_vs_reference")

    flush = args.denormals == "flushed"
    s_orig, s_opt = ort_session(path, threads, flush), ort_session(opt, threads, flush)
    # Every input by name (the zoo's RNNs take one per step); tsopt keeps the names.
    rng = np.random.default_rng(1)
    feed = {i.name: rng.random([d if isinstance(d, int) else 1 for d in i.shape], dtype=np.float32) for i in s_orig.get_inputs()}
    row["agree_error"] = rel_error(s_opt.run(None, feed), s_orig.run(None, feed))
    core = ov.Core()
    # f32 like the others: on CPUs with AVX512_BF16 or AMX, OpenVINO's default
    # inference precision is bf16 (other results, another speed).
    compiled = core.compile_model(str(path), "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                                                      "INFERENCE_PRECISION_HINT": "f32", "CPU_DENORMALS_OPTIMIZATION": flush})
    req = compiled.create_infer_request()
    ov_out = req.infer(feed)
    row["ov_error"] = rel_error([ov_out[o] for o in compiled.outputs], s_orig.run(None, feed))
    runners = {
        "ort_orig": lambda: s_orig.run(None, feed),
        "ort_tsopt": lambda: s_opt.run(None, feed),
        "ov_orig": lambda: req.infer(feed),
    }
    for f in runners.values():  # warm-up
        for _ in range(3):
            f()
    rounds = {k: [] for k in ["tsopt_orig", "tsopt_opt", *runners]}
    tsopt_runs = {"tsopt_orig": path, "tsopt_opt": opt}
    for rnd in range(args.rounds):
        # Each pair that a ratio compares (tsopt on the original and on its
        # output; ORT on both) swaps places every other round: with a fixed
        # order, ORT on tsopt's model ran 0.86-0.94x of ORT on the original
        # at 1 thread on six models in one judge, and 1.00x on the same files
        # timed alternately outside it (zoo_inception_v3: 0.998x).
        swap = rnd % 2 == 1
        for k in (reversed(tsopt_runs) if swap else tsopt_runs):
            time.sleep(0.2)  # the same pause as between the runners below
            rounds[k].append(tsopt_bench(args.tsopt, tsopt_runs[k], threads, args.reps, keep_denormals))
        order = ["ort_tsopt", "ort_orig", "ov_orig"] if swap else list(runners)
        for k in order:
            f = runners[k]
            # The previous runner's idle thread pool may still be spinning on the
            # second core (ONNX Runtime's intra-op threads spin after each run): at
            # 2 threads that made whichever runner came next run at about its
            # 1-thread speed on the small models (mobilenet_v2, squeezenet).
            time.sleep(0.2)
            rounds[k].append(median_ms(f, args.reps))
        # Where the two threads ran (the host moves the vCPUs; bench/core_round_trip.cpp).
        core = core_round_trip(args.core_probe) if threads > 1 else None
        if core is not None:
            row.setdefault("core_round_trip_ns", []).append(round(core, 1))
        log(f"  {name} t={threads} round {rnd + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rounds.items())
            + (f", core round trip {core:.0f} ns" if core is not None else ""))
    for k, v in rounds.items():
        row[k] = round(statistics.median(v), 3)
    row["vs_ort"] = round(row["ort_orig"] / row["tsopt_opt"], 3)
    row["vs_ov"] = round(row["ov_orig"] / row["tsopt_opt"], 3)
    row["ort_on_tsopt_output"] = round(row["ort_orig"] / row["ort_tsopt"], 3)
    return row


def agrees(r):
    return r["agree_error"] <= 1e-4 and (r.get("device_error") is None or r["device_error"] <= 1e-4)


def markdown(rows, args):
    out = [f"| model | threads | tsopt original ms | tsopt optimized ms | ORT original ms | ORT on tsopt's model ms "
           f"| OpenVINO original ms | tsopt vs ORT | tsopt vs OpenVINO | ORT gain from tsopt's model | optimize s | agree | OpenVINO error "
           f"| core round trip ns |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["optimize_exit"] != 0:
            what = f"exit {r['optimize_exit']}" if r["optimize_exit"] > 0 else "failed"
            out.append(f"| {r['model']} | {r['threads']} | {what}: {' '.join(r.get('error', []))} "
                       "| – | – | – | – | – | – | – | – | – | – | – |")
            continue
        device = "" if r.get("device_error") is None else f"; tsopt {r['device_error']:.1e}"
        out.append(f"| {r['model']} | {r['threads']} | {r['tsopt_orig']:.2f} | {r['tsopt_opt']:.2f} | {r['ort_orig']:.2f} "
                   f"| {r['ort_tsopt']:.2f} | {r['ov_orig']:.2f} | **{r['vs_ort']:.2f}x** | **{r['vs_ov']:.2f}x** "
                   f"| {r['ort_on_tsopt_output']:.2f}x{' (same graph)' if r.get('same_graph') else ''} | {r['optimize_s']}{' (pick untimed)' if r.get('timing_rounds') == 0 else ''} "
                   f"| {'yes' if agrees(r) else 'NO'} ({r['agree_error']:.1e}{device}) | {r['ov_error']:.1e} "
                   f"| {' / '.join(f'{x:.0f}' for x in r.get('core_round_trip_ns', [])) or '–'} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", required=True, type=Path, help="folder of <name>.onnx (bench/export_models.py)")
    ap.add_argument("--only", default="", help="comma-separated model names (default: every .onnx in --models)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    # tsopt optimize's own default: at 30 s the NASNets and the SRU model spent
    # the whole budget searching on a 2-vCPU machine, and their pick was then
    # written untimed (the cost model's choice, dependent on the machine's load).
    ap.add_argument("--budget", type=float, default=60)
    ap.add_argument("--tsopt", default="build/tools/tsopt/tsopt")
    ap.add_argument("--denormals", choices=["defaults", "flushed", "kept"], default="defaults",
                    help="defaults: each runtime's own (tsopt flushes denormals to zero, ONNX Runtime and OpenVINO keep them); "
                         "flushed: all three flush (session.set_denormal_as_zero, CPU_DENORMALS_OPTIMIZATION); "
                         "kept: all three keep them (tsopt --keep-denormals)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("--markdown", type=Path, help="also write the table as Markdown")
    ap.add_argument("--core-probe", default="",
                    help="build/bench/core_round_trip: run after each round of 2 or more threads, its round trip "
                         "between the two CPUs (about 55 ns sharing a last-level cache, 330 on another AMD CCD here) "
                         "logged and tabled per round")
    args = ap.parse_args()
    if args.rounds < 1 or args.reps < 1 or args.budget <= 0:
        ap.error("--rounds and --reps must be >= 1 and --budget > 0")
    models = sorted(args.models.glob("*.onnx"))
    if args.only:
        wanted = args.only.split(",")
        models = [m for m in models if m.stem in wanted]
        missing = set(wanted) - {m.stem for m in models}
        if missing:
            ap.error(f"not in {args.models}: {', '.join(sorted(missing))}")
    if not models:
        ap.error(f"no .onnx models in {args.models}")
    threads = [int(t) for t in args.threads.split(",")]
    print(f"vs_runtimes: onnxruntime {ort.__version__}, openvino {ov.__version__}, {os.cpu_count()} CPUs, "
          f"threads {threads}, {args.rounds} rounds x {args.reps} runs, budget {args.budget} s, denormals: {args.denormals}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tsopt-vs-runtimes-") as tmp:
        for i, m in enumerate(models):
            for t in threads:
                log(f"[{i + 1}/{len(models)}] {m.stem}, {t} thread(s)")
                # One model's failure (a runtime refusing tsopt's output, a
                # probe failing) is its row's, not the whole run's: the
                # others are still timed, and the exit status says it.
                try:
                    rows.append(run_model(args, m.stem, m, t, Path(tmp)))
                except Exception as e:  # noqa: BLE001 - onnxruntime and openvino raise their own types
                    msg = f"{type(e).__name__}: {e}".strip().splitlines()[-1][:400]
                    log(f"  {m.stem} t={t}: {msg}")
                    rows.append({"model": m.stem, "threads": t, "optimize_exit": -1, "error": [msg]})
    table = markdown(rows, args)
    print(table)
    ok = [r for r in rows if r["optimize_exit"] == 0]
    if ok:
        print(f"summary: {len(ok)}/{len(rows)} runs optimized; tsopt vs ORT geomean "
              f"{float(np.exp(np.mean(np.log([r['vs_ort'] for r in ok])))):.2f}x, vs OpenVINO "
              f"{float(np.exp(np.mean(np.log([r['vs_ov'] for r in ok])))):.2f}x; "
              f"outputs agree on {sum(agrees(r) for r in ok)}/{len(ok)}; "
              f"written without the end-to-end pick (--budget spent): {sum(r.get('timing_rounds') == 0 for r in ok)}")
        changed = [r for r in ok if not r.get("same_graph")]
        print(f"ORT on tsopt's model at least 0.98x of ORT on the original: {sum(r['ort_on_tsopt_output'] >= 0.98 for r in changed)}"
              f"/{len(changed)} runs whose graph tsopt changed ({len(ok) - len(changed)} kept the original graph)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0 if len(ok) == len(rows) and all(agrees(r) for r in ok) else 1


if __name__ == "__main__":
    sys.exit(main())
