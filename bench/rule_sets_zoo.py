#!/usr/bin/env python3
"""Two rule sets side by side on a set of models: what a larger set finds.

    python3 bench/rule_sets_zoo.py --tsopt build/tools/tsopt/tsopt \\
        --base n4-rules.txt --new n5-rules.txt ~/.cache/tsopt/models/*.onnx

For each model, `tsopt optimize --backend analytic` (the analytical cost
model: no device timing, so the two searches are compared on cost alone and
the result does not depend on machine load) runs once with each set, under
the same search options. Prints per model the cost each set reaches, the
search's seconds and expansions, and the rules of the new set that are not
in the base set and that the new set's result uses; then a summary: on how
many models each set reaches the lower cost, and which of the new set's own
rules the cheaper results use. Give `--budget` large enough that every
search ends at its expansion limit (marked otherwise). A set is `generated`, `axioms`, `all` or a
listing written by `tsopt-gen --listing`. Models run two at a time
(--jobs); the reports stay in --out.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile


def rule_names(tsopt, rules):
    """The names of a set's rules (`tsopt rules --rules SET`: each name on a
    line of its own, its text and provenance indented below it)."""
    out = subprocess.run([tsopt, "rules", "--rules", rules], check=True, capture_output=True, text=True).stdout
    # The last line counts them ("N of N rules (from ...)").
    return {line.split()[0] for line in out.splitlines()
            if line and not line[0].isspace() and not line.startswith("#") and " rules (from " not in line}


def optimize(tsopt, model, rules, report, extra):
    cmd = [tsopt, "optimize", model, "-o", report + ".onnx", "--backend", "analytic", "--report", report, "--rules", rules] + extra
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return {"error": "exit %d: %s" % (run.returncode, (run.stderr.strip().splitlines() or ["?"])[-1])}
    with open(report) as f:
        r = json.load(f)
    os.remove(report + ".onnx")
    return {
        "cost": r["after"]["cost_ms"],
        "before": r["before"]["cost_ms"],
        "seconds": r["search"]["seconds"],
        "expansions": r["search"]["expansions"],
        "stopped": r["search"]["stopped"],
        "used": [u for u in r.get("rules_used", []) if u != "layout move"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tsopt", required=True)
    ap.add_argument("--base", required=True, help="the smaller rule set")
    ap.add_argument("--new", required=True, help="the larger rule set")
    ap.add_argument("--out", default=None, help="directory for the reports (default: a temporary one)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default=None, help="also write the table as JSON")
    ap.add_argument("models", nargs="+")
    args, extra = ap.parse_known_args()
    out = args.out or tempfile.mkdtemp(prefix="rule-sets-")
    os.makedirs(out, exist_ok=True)
    print("rule_sets_zoo: loading the two sets' rule names ...", flush=True)
    base_names = rule_names(args.tsopt, args.base)
    new_names = rule_names(args.tsopt, args.new)
    own = new_names - base_names
    print("rule_sets_zoo: base %d rules, new %d rules, %d of them not in the base; %d models, %d at a time"
          % (len(base_names), len(new_names), len(own), len(args.models), args.jobs), flush=True)
    jobs = []
    for m in args.models:
        stem = os.path.splitext(os.path.basename(m))[0]
        for which, rules in (("base", args.base), ("new", args.new)):
            jobs.append((stem, which, m, rules, os.path.join(out, "%s.%s.json" % (stem, which))))
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(optimize, args.tsopt, m, rules, rep, extra): (stem, which) for stem, which, m, rules, rep in jobs}
        for n, f in enumerate(concurrent.futures.as_completed(futures), 1):
            stem, which = futures[f]
            results.setdefault(stem, {})[which] = f.result()
            print("rule_sets_zoo: [%d/%d] %s with the %s set done" % (n, len(jobs), stem, which), flush=True)
    print()
    print("| model | original cost (ms) | base set | new set | new/base | search s (base / new) | expansions (base / new) | new set's own rules used |")
    print("|---|---|---|---|---|---|---|---|")
    cheaper_new, cheaper_base, same, failed = [], [], [], []
    own_used = {}
    for m in args.models:
        stem = os.path.splitext(os.path.basename(m))[0]
        b, n = results[stem]["base"], results[stem]["new"]
        if "error" in b or "error" in n:
            failed.append(stem)
            print("| %s | failed: %s |" % (stem, b.get("error") or n.get("error")))
            continue
        used = sorted(set(n["used"]) & own)
        ratio = n["cost"] / b["cost"] if b["cost"] else 1.0
        if n["cost"] < b["cost"] * (1 - 1e-6):
            cheaper_new.append(stem)
            for u in used:
                own_used.setdefault(u, []).append(stem)
        elif b["cost"] < n["cost"] * (1 - 1e-6):
            cheaper_base.append(stem)
        else:
            same.append(stem)
        # A search the wall-time cap ended, not --expansions, depends on the machine's load.
        capped = lambda x: "" if x["stopped"].startswith("expansion") else " (%s)" % x["stopped"]
        print("| %s | %.3f | %.3f | %.3f | %.4f | %.1f / %.1f | %d%s / %d%s | %s |"
              % (stem, b["before"], b["cost"], n["cost"], ratio, b["seconds"], n["seconds"], b["expansions"], capped(b),
                 n["expansions"], capped(n), ", ".join(used) if used else "-"))
        results[stem]["new_own_used"] = used
    print()
    print("summary: new set cheaper on %d (%s), base set cheaper on %d (%s), the same on %d, failed %d"
          % (len(cheaper_new), ", ".join(cheaper_new) or "-", len(cheaper_base), ", ".join(cheaper_base) or "-",
             len(same), len(failed)))
    print("the new set's own rules in its cheaper results: %d (%s)"
          % (len(own_used), "; ".join("%s: %s" % (u, ", ".join(ms)) for u, ms in sorted(own_used.items())) or "-"))
    print("reports: %s" % out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"base": args.base, "new": args.new, "base_rules": len(base_names), "new_rules": len(new_names),
                       "new_own_rules": len(own), "models": results, "cheaper_new": cheaper_new,
                       "cheaper_base": cheaper_base, "same": same, "failed": failed, "new_own_used": own_used}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
