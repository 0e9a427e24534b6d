"""Fuzz the inputs that enter the stack: ONNX models, .vtaprog and .vtamod files, instruction words, config files.

    python benchmarks/fuzz.py --seconds 300 [--targets onnx,vtaprog,decode,config] [--engine auto|atheris|hypothesis]

``--seconds`` is the whole run, split evenly over the targets. Each target runs in its own worker
process; every case ends ``ok``, in one of the project's documented errors for that input
(``tests/fuzz/targets.py: ALLOWED``) or is counted as a *foreign* exception (a bug; the first few
are listed with their input bytes in hex) or a *hang* (one case over ``--hang-seconds``, or a worker
that stops answering). Engines: ``atheris`` (coverage-guided libFuzzer over the instrumented project
packages; the optional extra ``pip install -e .[fuzz]``) when it imports, else ``hypothesis``
(``st.binary()`` inputs). The last printed line is one JSON object:
``{"engine", "seconds", "targets": {name: {"cases", "ok", "errors", "foreign_exceptions", "hangs", ...}}}``.
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_NAMES = ("onnx", "vtaprog", "vtamod", "decode", "config", "tunelog", "llvmlog", "cudalog", "declaration")
MAX_EXAMPLES = 5  # foreign exceptions listed per target
PROJECT_PACKAGES = ("compiler", "isa", "jit_runtime", "simulator", "tests.fuzz")


class Hang(BaseException):
    """One case ran past the hang limit (raised from SIGALRM; a BaseException so no handler in the code swallows it)."""


class TimeUp(BaseException):
    """The worker's time is over (stops the hypothesis loop)."""


# ------------------------------------------------------------------------------------ worker
class Recorder:
    """Counts outcomes of one target and writes them to ``out`` (so a killed worker still reports)."""

    def __init__(self, target: str, allowed: tuple, out: Path, hang_s: float) -> None:
        self.target, self.allowed, self.out, self.hang_s = target, allowed, out, hang_s
        self.stats = {"cases": 0, "ok": 0, "errors": {}, "foreign_exceptions": 0, "hangs": 0, "max_case_s": 0.0,
                      "foreign": [], "in_case": False}

    def write(self) -> None:
        """Atomically replace the stats file (after every case: libFuzzer ends the process without cleanup)."""
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.stats))
        tmp.replace(self.out)

    def run(self, fn, data: bytes) -> None:
        s = self.stats
        s["in_case"] = True
        self.write()
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, self.hang_s)
        try:
            fn(data)
            s["ok"] += 1
        except Hang:
            s["hangs"] += 1
            self._example("hang", f"over {self.hang_s:g} s", data)
        except self.allowed as exc:
            name = type(exc).__name__
            s["errors"][name] = s["errors"].get(name, 0) + 1
        except Exception as exc:  # the point of fuzzing: anything else is a bug to report
            s["foreign_exceptions"] += 1
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            self._example(type(exc).__name__, f"{exc} (at {tb.filename}:{tb.lineno})", data)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        s["cases"] += 1
        s["max_case_s"] = round(max(s["max_case_s"], time.perf_counter() - t0), 3)
        s["in_case"] = False
        self.write()

    def _example(self, kind: str, msg: str, data: bytes) -> None:
        if len(self.stats["foreign"]) < MAX_EXAMPLES:
            self.stats["foreign"].append({"type": kind, "message": msg[:400], "input_hex": data.hex()})


def _on_alarm(signum, frame):
    raise Hang()


def worker(target: str, seconds: float, engine: str, out: Path, hang_s: float) -> None:
    sys.path.insert(0, str(ROOT))
    signal.signal(signal.SIGALRM, _on_alarm)
    import logging
    import warnings

    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    if engine == "atheris":
        import atheris

        with atheris.instrument_imports(include=list(PROJECT_PACKAGES)):
            from tests.fuzz import targets
    else:
        from tests.fuzz import targets
    rec = Recorder(target, targets.ALLOWED[target], out, hang_s)
    fn = targets.TARGETS[target]
    try:
        fn(b"")  # warm caches (base models, programs) outside the counted cases
    except targets.ALLOWED[target]:
        pass
    rec.write()
    if engine == "atheris":
        def one(data: bytes) -> None:
            rec.run(fn, data)
        # -timeout=0: libFuzzer's own SIGALRM timer is off, the recorder's per-case alarm finds hangs
        atheris.Setup([sys.argv[0], f"-max_total_time={max(1, int(seconds))}", "-timeout=0", "-rss_limit_mb=8192",
                       "-max_len=256", "-print_final_stats=0", f"-artifact_prefix={out.parent}/"], one)
        try:
            atheris.Fuzz()
        finally:
            rec.write()
        return
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    end = time.monotonic() + seconds

    @settings(max_examples=10 ** 9, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=256))
    def loop(data: bytes) -> None:
        if time.monotonic() > end:
            raise TimeUp()
        rec.run(fn, data)

    try:
        loop()
    except TimeUp:
        pass
    rec.write()


# ------------------------------------------------------------------------------------ parent
def pick_engine(engine: str) -> str:
    if engine != "auto":
        return engine
    try:
        import atheris  # noqa: F401
    except ImportError:
        return "hypothesis"
    return "atheris"


def run_target(target: str, seconds: float, engine: str, hang_s: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "stats.json"
        cmd = [sys.executable, __file__, "--worker", target, "--seconds", str(seconds), "--engine", engine,
               "--hang-seconds", str(hang_s), "--out", str(out)]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        killed = False
        try:
            _, err = proc.communicate(timeout=seconds + 3 * hang_s + 120)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            killed = True
        stats = json.loads(out.read_text()) if out.exists() else {"cases": 0, "ok": 0, "errors": {},
                                                                    "foreign_exceptions": 0, "hangs": 0, "foreign": []}
        if killed:  # the worker stopped answering: a case that never returned
            stats["hangs"] += 1
            stats["foreign"].append({"type": "hang", "message": "worker killed at the time limit"})
        elif stats.pop("in_case", False) or proc.returncode != 0:  # the worker process died inside a case
            stats["foreign_exceptions"] += 1
            stats["foreign"].append({"type": "worker crash", "message": f"exit {proc.returncode}: {(err or '')[-400:]}"})
        stats.pop("in_case", None)
        stats["seconds"] = round(time.monotonic() - t0, 1)
        stats["worker_exit"] = proc.returncode
        return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="total fuzzing time, split over the targets")
    ap.add_argument("--targets", default=",".join(TARGET_NAMES), help="comma-separated subset of "
                    + ", ".join(TARGET_NAMES))
    ap.add_argument("--engine", default="auto", choices=("auto", "atheris", "hypothesis"))
    ap.add_argument("--hang-seconds", type=float, default=30.0, help="one case longer than this is a hang")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.seconds, args.engine, Path(args.out), args.hang_seconds)
        return 0
    names = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in names if t not in TARGET_NAMES]
    if unknown or not names:
        ap.error(f"unknown target(s) {unknown}; choose from {', '.join(TARGET_NAMES)}")
    if args.seconds <= 0 or args.hang_seconds <= 0:
        ap.error("--seconds and --hang-seconds must be > 0")
    engine = pick_engine(args.engine)
    per = args.seconds / len(names)
    result = {"engine": engine, "seconds": args.seconds, "seconds_per_target": round(per, 1), "targets": {}}
    for t in names:
        stats = run_target(t, per, engine, args.hang_seconds)
        result["targets"][t] = stats
        print(f"{t:8s} {stats['cases']:7d} cases  ok {stats['ok']:6d}  errors {sum(stats['errors'].values()):6d}  "
              f"foreign {stats['foreign_exceptions']}  hangs {stats['hangs']}  ({stats['seconds']} s)", flush=True)
    result["foreign_exceptions"] = sum(s["foreign_exceptions"] for s in result["targets"].values())
    result["hangs"] = sum(s["hangs"] for s in result["targets"].values())
    print(json.dumps(result))
    return 1 if result["foreign_exceptions"] or result["hangs"] else 0


if __name__ == "__main__":
    sys.exit(main())
