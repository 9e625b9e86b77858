"""``dltune recommend``: the framework and configuration to use, predicted from the knowledge base."""

from __future__ import annotations

import argparse
import math

EXAMPLES = """examples:
  dltune recommend --workload digits
  dltune recommend --workload digits --model mlp --objective accuracy --max-train-time-s 60 --explain
  dltune recommend --workload digits --model mlp --frameworks torch,theano --json
"""


def add_parser(parser: argparse.ArgumentParser) -> None:
    from dltune.cli._common import HelpFormatter, add_renamed, add_workload_args
    from dltune.config import CONSTRAINTS, OBJECTIVES, constraint_flag
    from dltune.config._goals import renamed_constraint_flags

    parser.formatter_class = HelpFormatter
    parser.epilog = EXAMPLES
    add_workload_args(parser)
    parser.add_argument("--hardware", metavar="FILE.json",
                        help="recommend for the machine this JSON describes (default: this one)")
    parser.add_argument("--objective", default="balanced", metavar="{" + ",".join(OBJECTIVES) + "}",
                        help="accuracy (the surest; of those within half a point of it, the highest predicted "
                             "accuracy), time (the fastest within 2 points of the surest) or balanced (one "
                             "accuracy point per halving of the training time)")
    for key, (what, unit, _, _) in CONSTRAINTS.items():
        parser.add_argument(constraint_flag(key), type=float, dest=key, metavar=key.rsplit("_", 1)[-1].upper()
                            if key != "min_accuracy" else "A",
                            help=f"predicted {what}, {unit} (default: none)")
    add_renamed(parser, **renamed_constraint_flags())
    parser.add_argument("--frameworks",
                        help="comma-separated candidate frameworks; naming a retired one (mxnet, theano) makes it a "
                             "candidate (default: the maintained default frameworks installed here)")
    parser.add_argument("--include-legacy", action="store_true",
                        help="make the retired frameworks (mxnet, theano) candidates too (default: their best "
                             "is shown for comparison only)")
    parser.add_argument("--top-k", type=int, default=3, help="configurations to return: the pick and alternatives")
    parser.add_argument("--storage", default="default", metavar="URL",
                        help="Optuna storage whose records are added, and where --verify stores its run "
                             "(default: $DLTUNE_STORAGE, else "
                             "./dltune.db when it exists; 'none': none)")
    parser.add_argument("--records", action="append", metavar="FILE",
                        help="extra record files (repeatable; default: none)")
    parser.add_argument("--kb", metavar="FILE", help="knowledge-base records file (default: the shipped one)")
    parser.add_argument("--explain", action="store_true",
                        help="print every candidate shown with its figures, the caveats and the reasoning")
    parser.add_argument("--verify", action="store_true",
                        help="train the recommended configuration here and print predicted against measured")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dltune._errors import ParameterError
    from dltune.backends._registry import BACKENDS
    from dltune.cli._common import parse_key_values, parse_list, print_json
    from dltune.recommend import RECOMMEND_CONSTRAINTS, recommend

    if args.verify and args.hardware:
        raise ParameterError("The 'verify' option measures on this machine; it cannot be used with --hardware.")
    data_params = parse_key_values(args.data, "data")
    workload = args.workload
    if data_params:
        from dltune._workload import Workload

        workload = Workload.from_name(args.workload, args.model, **data_params)
    # Each constraint's option is named after it (--max-train-time-s: max_train_time_s).
    constraints = {name: getattr(args, name) for name in RECOMMEND_CONSTRAINTS
                   if getattr(args, name) is not None}
    frameworks = (parse_list("frameworks", args.frameworks, list(BACKENDS))
                  if args.frameworks is not None else None)
    rec = recommend(workload, args.hardware, args.objective, constraints or None, frameworks,
                    args.top_k, model=args.model, records=args.records,
                    storage=None if args.storage == "none" else args.storage, knowledge_base=args.kb,
                    include_legacy=args.include_legacy)
    verified = _verify(args, workload, rec) if args.verify else None
    if args.json:
        out = rec.to_dict()
        if verified is not None:
            out["verify"] = verified
        print_json(out)
        return 0
    print(rec.details() if args.explain else rec.summary(more="--explain"))
    if verified is not None:
        _print_verify(verified)
    return 0


def _verify(args: argparse.Namespace, workload, rec) -> dict:
    from dltune import benchmark
    from dltune._errors import RunFailedError
    from dltune._storage_url import mask_url, resolve_storage
    from dltune._workload import Workload

    if isinstance(workload, str):
        workload = Workload.from_name(workload, args.model)
    # Stored where recommend reads (the one storage rule), so that the next answer learns from it.
    stored = resolve_storage(args.storage)
    [record] = benchmark(workload, rec.config, progress=not args.json, storage=stored)
    if not record.ok:
        raise RunFailedError(f"the recommended configuration failed: {record.error['message']}")
    out = {"record_id": record.id, "storage": mask_url(stored) if stored else None}
    for key, metric in (("accuracy", "test_accuracy"), ("train_time_s", "train_time_s"),
                        ("peak_rss_mb", "peak_rss_mb")):
        point, low, high = rec.predicted[key]
        measured = record.metrics.get(metric)
        out[key] = {"predicted": point, "low": low, "high": high if math.isfinite(high) else None,
                    "measured": measured,
                    "inside": measured is not None and low <= measured <= high}
    return out


def _print_verify(verified: dict) -> None:
    from dltune.cli._common import format_table

    rows = [{"metric": k, "predicted": v["predicted"], "low": v["low"], "high": v["high"],
             "measured": v["measured"], "inside": "yes" if v["inside"] else "no"}
            for k, v in verified.items() if isinstance(v, dict)]
    print("\nverify (measured here by dltune.benchmark):")
    print(format_table(rows, [("metric", "metric", ""), ("predicted", "predicted", ".4g"),
                              ("low", "low", ".4g"), ("high", "high", ".4g"),
                              ("measured", "measured", ".4g"), ("inside", "in interval", "")]))
    print(f"stored in {verified['storage']}" if verified.get("storage") else "not stored (--storage none)")
    hint = _verify_hint(verified.get("train_time_s"))
    if hint:
        import textwrap

        print(textwrap.fill(hint, 120, break_on_hyphens=False, break_long_words=False))


def _verify_hint(time: dict | None) -> str | None:
    """What a training time outside its interval suggests (None when it is inside)."""
    if not time or time["inside"] or time["measured"] is None:
        return None
    ratio = time["measured"] / time["predicted"]
    return (f"The training time took {ratio:.2g}x the prediction, outside its interval. One run "
            f"can be unlucky; if runs here are consistently "
            f"{'slower' if ratio > 1 else 'faster'}, this machine may not run at the speed the "
            f"knowledge base (or its calibration) recorded for this kind of machine: "
            f"`dltune kb calibrate` (a few minutes) measures its speed now, and "
            f"`python benchmarks/kb_speed_drift.py` compares it with the recorded runs.")
