"""``dltune recommend``: the framework and configuration to use, predicted from the knowledge base."""

from __future__ import annotations

import argparse


def add_parser(parser: argparse.ArgumentParser) -> None:
    from dltune.cli._common import add_workload_args

    add_workload_args(parser)
    parser.add_argument("--hardware", metavar="FILE.json",
                        help="recommend for the machine this JSON describes (default: this one)")
    parser.add_argument("--objective", default="balanced",
                        help="accuracy (the surest; of those within half a point of it, the highest predicted accuracy), time (the fastest "
                             "within 2 points of the surest) or balanced (one accuracy point per halving of "
                             "the training time; default)")
    parser.add_argument("--max-train-time", type=float, metavar="S", help="training-time budget, seconds")
    parser.add_argument("--max-memory-mb", type=float, metavar="MB", help="peak-memory budget")
    parser.add_argument("--min-accuracy", type=float, metavar="A", help="minimum test accuracy (0..1)")
    parser.add_argument("--frameworks", help="comma-separated candidate frameworks (default: all measured)")
    parser.add_argument("--top-k", type=int, default=3, help="configurations to show (default: 3)")
    parser.add_argument("--storage", default="default",
                        help="Optuna storage whose records are added (default: ./dltune.db if present)")
    parser.add_argument("--records", action="append", metavar="FILE", help="extra record files (repeatable)")
    parser.add_argument("--kb", metavar="FILE", help="knowledge-base records file (default: the shipped one)")
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

        workload = Workload.from_name(args.workload, args.model or "lenet", **data_params)
    # Each constraint's option is named after it (--max-train-time: max_train_time).
    constraints = {name: getattr(args, name) for name in RECOMMEND_CONSTRAINTS
                   if getattr(args, name) is not None}
    frameworks = (parse_list("frameworks", args.frameworks, list(BACKENDS))
                  if args.frameworks is not None else None)
    rec = recommend(workload, args.hardware, args.objective, constraints or None, frameworks,
                    args.top_k, model=args.model, records=args.records,
                    storage=None if args.storage == "none" else args.storage, knowledge_base=args.kb)
    verified = _verify(args, workload, rec) if args.verify else None
    if args.json:
        out = rec.to_dict()
        if verified is not None:
            out["verify"] = verified
        print_json(out)
        return 0
    print(rec)
    if verified is not None:
        _print_verify(verified)
    return 0


def _verify(args: argparse.Namespace, workload, rec) -> dict:
    from dltune import benchmark
    from dltune._errors import RunFailedError
    from dltune._workload import Workload

    if isinstance(workload, str):
        workload = Workload.from_name(workload, args.model or "lenet")
    [record] = benchmark(workload, rec.config, progress=not args.json)
    if not record.ok:
        raise RunFailedError(f"the recommended configuration failed: {record.error['message']}")
    out = {"record_id": record.id}
    for key, metric in (("accuracy", "test_accuracy"), ("train_time_s", "train_time_s"),
                        ("peak_rss_mb", "peak_rss_mb")):
        point, low, high = rec.predicted[key]
        measured = record.metrics.get(metric)
        out[key] = {"predicted": point, "low": low, "high": high, "measured": measured,
                    "inside": measured is not None and low <= measured <= high}
    return out


def _print_verify(verified: dict) -> None:
    from dltune.cli._common import format_table

    rows = [{"metric": k, "predicted": v["predicted"], "low": v["low"], "high": v["high"],
             "measured": v["measured"], "inside": "yes" if v["inside"] else "NO"}
            for k, v in verified.items() if isinstance(v, dict)]
    print("\nverify (measured here by dltune.benchmark):")
    print(format_table(rows, [("metric", "metric", ""), ("predicted", "predicted", ".4g"),
                              ("low", "low", ".4g"), ("high", "high", ".4g"),
                              ("measured", "measured", ".4g"), ("inside", "in interval", "")]))
    hint = _verify_hint(verified.get("train_time_s"))
    if hint:
        print(hint)


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
