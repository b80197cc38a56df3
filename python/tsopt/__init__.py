"""tsopt: rewrite ONNX models into faster equivalent ones with rules that were
generated automatically and proven correct by Z3.

    import tsopt
    optimized = tsopt.optimize("model.onnx", budget=10)            # onnx.ModelProto
    optimized, report = tsopt.optimize(model, report=True)         # + the JSON report as a dict
    tsopt.rules()                                                  # the proven rules built in
    again = tsopt.replay("model.onnx", report)                     # the optimized model, rebuilt from
                                                                   # the report's list of rewrites

`optimize` runs what `tsopt optimize` runs (docs/cli.md), in this process:
the search, the choice among the best candidates timed on the backend,
verification of the written model against the original on random inputs,
and the report. Failures raise tsopt.Error (with the command's exit code).
"""
from __future__ import annotations

import json
import os
import pathlib
import tempfile
from typing import Any, NamedTuple

from . import _tsopt

__version__: str = _tsopt.version
__all__ = ["optimize", "replay", "inspect", "rules", "Rule", "Error", "__version__"]


class Error(RuntimeError):
    """A failure of tsopt; `exit_code` is the command's (1 usage, 2 bad input,
    3 outputs differ, 4 backend unavailable, 5 write failed, 6 internal)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class Rule(NamedTuple):
    name: str
    text: str  # "(source) => (target)"
    provenance: str  # how it was found and proven


def _run(args: list[str]) -> str:
    code, out, err = _tsopt.run([str(a) for a in args])
    if code != 0:
        lines = [l for l in err.splitlines() if l.strip()]
        raise Error("\n".join(lines) or f"tsopt {args[0]} exited {code}", code)
    return out


def _model_path(model: Any, tmp: pathlib.Path) -> str:
    """A path to the model: paths pass through; an onnx.ModelProto or the
    bytes of one are written to a temporary file."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    elif hasattr(model, "SerializeToString"):
        data = model.SerializeToString()
    else:
        raise TypeError(f"model: expected a path, an onnx.ModelProto or bytes, got {type(model).__name__}")
    path = tmp / "input.onnx"
    path.write_bytes(data)
    return str(path)


def _import_options(batch: int | None, dims: dict[str, int] | None) -> list[str]:
    args: list[str] = []
    if batch is not None:
        args += ["--batch", str(int(batch))]
    if dims:
        args += ["--dims", ",".join(f"{name}={int(value)}" for name, value in dims.items())]
    return args


def optimize(model: Any, *, budget: float = 60.0, backend: str = "cpu", alpha: float = 1.05,
             rules: str | os.PathLike = "generated", batch: int | None = None, dims: dict[str, int] | None = None,
             tolerance: float = 1e-4, seed: int = 1, pictures: str | os.PathLike | None = None,
             report: bool = False):
    """Optimizes an ONNX model and returns the optimized onnx.ModelProto
    (with report=True: the model and the JSON report as a dict).

    model: a path, an onnx.ModelProto, or its serialized bytes.
    budget: seconds for the whole optimization (search, timing, verification).
    backend: "cpu" (oneDNN, measured costs), "analytic" (cost formulas, the
        reference executor verifies) or "cuda".
    alpha: relaxation of the backtracking search (1.0: greedy).
    rules: "generated" (the proven default set), "axioms", "all", or a
        listing file written by tsopt-gen --listing.
    batch, dims: values for dynamic input dimensions.
    tolerance: largest relative difference accepted between the outputs of
        the original and the optimized model on random inputs.
    pictures: a directory for before/after pictures of the graph.
    """
    import onnx  # the result is an onnx.ModelProto

    with tempfile.TemporaryDirectory(prefix="tsopt-") as d:
        tmp = pathlib.Path(d)
        out, rep = tmp / "optimized.onnx", tmp / "report.json"
        args = ["optimize", _model_path(model, tmp), "-o", out, "--report", rep, "--budget", budget,
                "--backend", backend, "--alpha", alpha, "--rules", os.fspath(rules), "--tolerance", tolerance,
                "--seed", seed, "--quiet", *_import_options(batch, dims)]
        if pictures is not None:
            args += ["--dot", os.fspath(pictures)]
        _run(args)
        result = onnx.load_model_from_string(out.read_bytes())
        if report:
            return result, json.loads(rep.read_text())
        return result


def replay(model: Any, report: dict | str | os.PathLike, *, rules: str | os.PathLike = "generated",
           batch: int | None = None, dims: dict[str, int] | None = None):
    """Rebuilds an optimized model from the original and the rewrites its
    report lists (report["rewrites"]: each rule, the operators it matched,
    its cost), as `tsopt replay` does, and returns it as an onnx.ModelProto:
    the model optimize wrote. `rules`, `batch` and `dims` as given to optimize.
    """
    import onnx

    with tempfile.TemporaryDirectory(prefix="tsopt-") as d:
        tmp = pathlib.Path(d)
        if isinstance(report, dict):
            path = tmp / "report.json"
            path.write_text(json.dumps(report))
            report = path
        out = tmp / "replayed.onnx"
        _run(["replay", _model_path(model, tmp), "--report", os.fspath(report), "-o", out, "--rules", os.fspath(rules),
              *_import_options(batch, dims)])
        return onnx.load_model_from_string(out.read_bytes())


def inspect(model: Any, *, batch: int | None = None, dims: dict[str, int] | None = None) -> str:
    """What `tsopt inspect` prints: operators, shapes, opaque operators, FLOPs."""
    with tempfile.TemporaryDirectory(prefix="tsopt-") as d:
        return _run(["inspect", _model_path(model, pathlib.Path(d)), *_import_options(batch, dims)])


def rules(set: str = "generated") -> list[Rule]:
    """The rules built in: "generated" (what optimize uses by default, every
    one proven by Z3), "axioms" (the axioms read as rules) or "all"."""
    if set not in ("generated", "axioms", "all"):
        raise ValueError(f"rules: set must be 'generated', 'axioms' or 'all', got {set!r}")
    return [Rule(*r) for r in _tsopt.rules(set)]
