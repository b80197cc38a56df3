#!/bin/sh
# The `tsopt` command with an engine's operators loaded from a plugin
# (include/tsopt/plugin.hpp): a model using them is inspected, optimized with
# the engine's own rule listing and verified; without the plugin its nodes
# are opaque; a bad plugin is an error naming it.
# usage: plugin_test.sh TSOPT PLUGIN.so MAKE_ENGINE_MODEL RULES.txt
set -eu
tsopt=$1 plugin=$2 make=$3 rules=$4
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
count() {  # count FILE.json TYPE: operators of that type in an inspect --json
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["operator_counts"].get(sys.argv[2], 0))' "$1" "$2"
}

"$make" "$d/engine.onnx"

# Without the plugin: the engine's nodes are opaque.
"$tsopt" inspect "$d/engine.onnx" > "$d/plain.txt"
grep -q "neg (opaque)" "$d/plain.txt" || { cat "$d/plain.txt"; fail "without the plugin neg should be opaque"; }

# With it: neg and sub are operators tsopt rewrites.
"$tsopt" inspect "$d/engine.onnx" --plugin "$plugin" --json > "$d/in.json"
[ "$(count "$d/in.json" neg)" = 3 ] || { cat "$d/in.json"; fail "expected three neg operators"; }
grep -q '"opaque": \[\]' "$d/in.json" || { cat "$d/in.json"; fail "expected no opaque operators with the plugin"; }

"$tsopt" optimize "$d/engine.onnx" -o "$d/out.onnx" --plugin="$plugin" --rules "$rules" --backend analytic \
    --report "$d/report.json" > "$d/optimize.txt" 2>&1 || { cat "$d/optimize.txt"; fail "optimize with the plugin"; }
"$tsopt" inspect "$d/out.onnx" --plugin "$plugin" --json > "$d/out.json"
[ "$(count "$d/out.json" neg)" = 0 ] || { cat "$d/out.json"; fail "the optimized model still has neg"; }
[ "$(count "$d/out.json" sub)" = 1 ] || { cat "$d/out.json"; fail "the optimized model should have one sub"; }
# The two models compute the same, on the reference semantics of the engine's operators.
"$tsopt" bench "$d/engine.onnx" "$d/out.onnx" --plugin "$plugin" --reps 1 > "$d/bench.txt" 2>&1 ||
    { cat "$d/bench.txt"; fail "bench of the two models"; }

# A library that cannot be loaded, and one without the entry point.
set +e
"$tsopt" inspect "$d/engine.onnx" --plugin "$d/missing.so" > "$d/e1.txt" 2>&1; rc1=$?
"$tsopt" inspect "$d/engine.onnx" --plugin libm.so.6 > "$d/e2.txt" 2>&1; rc2=$?
"$tsopt" inspect "$d/engine.onnx" --plugin > "$d/e3.txt" 2>&1; rc3=$?
set -e
[ $rc1 = 2 ] && grep -q "cannot load '$d/missing.so'" "$d/e1.txt" || { cat "$d/e1.txt"; fail "missing plugin: exit $rc1"; }
[ $rc2 = 2 ] && grep -q "defines no tsopt_plugin_register" "$d/e2.txt" || { cat "$d/e2.txt"; fail "no entry point: exit $rc2"; }
[ $rc3 = 1 ] && grep -q "plugin needs a value" "$d/e3.txt" || { cat "$d/e3.txt"; fail "--plugin without a value: exit $rc3"; }
echo "ok: the engine's operators through the tsopt command: opaque without the plugin, rewritten with it"
