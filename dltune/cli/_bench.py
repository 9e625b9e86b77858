"""``dltune bench``: train configurations in isolated, monitored workers and print the study's table."""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from dltune._errors import DltuneError
from dltune._log import logger
from dltune.backends._registry import framework_label
from dltune.cli._common import (
    add_workload_args,
    format_table,
    frameworks_from_args,
    load_workload,
    parse_list,
    print_json,
    storage_line,
)

TABLE_COLUMNS = [
    ("framework", "framework", ""),
    ("status", "status", ""),
    ("train_s", "train s", ".2f"),
    ("test_s", "test s", ".3f"),
    ("accuracy_pct", "accuracy %", ".2f"),
    ("cpu_pct", "CPU %", ".0f"),
    ("peak_mb", "peak MB", ".0f"),
    ("threads", "threads (intra/inter)", ""),
]


EXAMPLES = """examples:
  dltune bench --workload digits --epochs 1
  dltune bench --workload digits --model mlp --frameworks all --repeats 3 --out runs.csv
  dltune bench --workload cifar10 --preset caffe --frameworks torch --threads 2"""


def add_parser(parser: argparse.ArgumentParser) -> None:
    from dltune.cli._common import add_frameworks_arg, add_renamed, add_storage_arg

    parser.epilog = EXAMPLES
    add_workload_args(parser)
    add_frameworks_arg(parser)
    parser.add_argument("--preset", help="start from a framework's published defaults "
                        "(tensorflow, caffe, torch, theano; their CIFAR-10 ones on 3-channel "
                        "data, where theano has none); other options override it")
    from dltune.config import TrainConfig

    d = TrainConfig()  # the same for every framework; a --preset's replace them
    parser.add_argument("--epochs", type=int,
                        help=f"passes over the training data (default: {d.epochs}, or the preset's)")
    parser.add_argument("--batch-size", type=int,
                        help=f"examples per step (default: {d.batch_size}, or the preset's)")
    parser.add_argument("--lr", type=float,
                        help=f"learning rate (default: {d.learning_rate:g}, or the preset's)")
    parser.add_argument("--optimizer",
                        help=f"sgd, momentum or adam (default: {d.optimizer}, or the preset's)")
    parser.add_argument("--momentum", type=float,
                        help=f"momentum of the momentum optimizer (default: {d.momentum:g})")
    parser.add_argument("--weight-decay", type=float,
                        help=f"L2 weight decay (default: {d.weight_decay:g}, or the preset's)")
    parser.add_argument("--seed", type=int, help="seed of the weights and the batch order "
                        f"(default: {d.seed})")
    parser.add_argument("--threads", type=int, help="intra-op and BLAS threads, inter-op 1 "
                        "(default: the framework's own choice)")
    parser.add_argument("--inter-op", type=int, help="inter-op threads (default: as --threads)")
    parser.add_argument("--blas-threads", type=int, help="OpenMP / MKL / OpenBLAS threads "
                        "(default: as --threads)")
    parser.add_argument("--cores", type=int, help="pin the worker to the first N usable cores "
                        "(default: not pinned)")
    parser.add_argument("--device", choices=None, help="cpu (default) or cuda")
    parser.add_argument("--run-timeout", type=float, metavar="S",
                        help=f"kill a run after S seconds (default: {d.timeout_s:g})")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timing repeats per configuration and seed, same seed: timing noise "
                        "only (median reported)")
    parser.add_argument("--seeds", type=int, default=1, metavar="K",
                        help="train with K seeds (--seed, +1, ...): mean, spread and 95%% "
                        "interval of accuracy and training time")
    parser.add_argument("--out", help="also save the records (.csv, or JSON otherwise)")
    add_storage_arg(parser, "the records are stored in, where recommend fits on them",
                    none_ok=True)
    parser.add_argument("--json", action="store_true", help="print the records as JSON, nothing else")
    parser.add_argument("--fault", help=argparse.SUPPRESS)
    add_renamed(parser, timeout="--run-timeout")
    parser.set_defaults(func=run)


def frameworks_for(text: str | None) -> list[str]:
    """The backends named by ``--frameworks``: the default ones when None, ``all`` every
    benchmarkable one installed."""
    from dltune._log import logger
    from dltune.backends._registry import BACKENDS
    from dltune.envs import backend_status

    names = [n for n, info in BACKENDS.items() if info.benchmarkable]
    if text is not None and text.strip() == "all":
        available = {s.name for s in backend_status() if s.available}
        chosen = [n for n in names if n in available and n != "numpy"]
        skipped = [n for n in names if n not in available and n != "numpy"]
        if skipped:
            logger.info("not available here, skipped: %s (see `dltune env status`)", ", ".join(skipped))
        return chosen
    if text is None:
        return frameworks_from_args(None, bool)
    return parse_list("frameworks", text, names)


def configs_from_args(args: argparse.Namespace, frameworks: list[str], dataset_kind: str) -> list[Any]:
    """One validated :class:`TrainConfig` per framework from the command-line options; a
    ``--preset`` is its published settings for ``dataset_kind`` (:func:`dltune.data.dataset_kind`)."""
    from dltune.config import ThreadConfig, TrainConfig

    overrides: dict[str, Any] = {}
    for option, field in (("epochs", "epochs"), ("batch_size", "batch_size"), ("lr", "learning_rate"),
                          ("optimizer", "optimizer"), ("momentum", "momentum"),
                          ("weight_decay", "weight_decay"), ("seed", "seed"), ("device", "device"),
                          ("run_timeout", "timeout_s")):
        value = getattr(args, option)
        if value is not None:
            overrides[field] = value
    threads = ThreadConfig.uniform(args.threads)
    if args.inter_op is not None or args.blas_threads is not None or args.cores is not None:
        threads = ThreadConfig(
            intra_op=threads.intra_op,
            inter_op=args.inter_op if args.inter_op is not None else threads.inter_op,
            blas=args.blas_threads if args.blas_threads is not None else threads.blas,
            cores=args.cores,
        )
    threads.validate()
    configs = []
    for framework in frameworks:
        if args.preset:
            base = TrainConfig.preset(args.preset, dataset=dataset_kind, framework=framework)
        else:
            base = TrainConfig(framework=framework)
        configs.append(base.replace(threads=threads, **overrides).validate(max_cores=None))
    return configs


def table_columns(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The table's columns; "GPU MB" (the framework allocator's peak on the device) after the
    process's host memory when a run has it."""
    columns = list(TABLE_COLUMNS)
    if any(row.get("gpu_mb") is not None for row in rows):
        columns.insert(columns.index(("peak_mb", "peak MB", ".0f")) + 1, ("gpu_mb", "GPU MB", ".0f"))
    return columns


def seed_line(record: Any) -> str:
    """The seeds' mean, spread and 95 % interval of accuracy and training time, in one line."""
    s = record.metrics["seeds"]
    acc, secs = s["test_accuracy"], s["train_time_s"]
    return (f"{framework_label(record.framework)}, {acc['n']} seeds: accuracy "
            f"{100 * acc['mean']:.2f}% sd {100 * acc['sd']:.2f} [{100 * acc['interval'][1]:.2f}, "
            f"{100 * acc['interval'][2]:.2f}]; train {secs['mean']:.2f} s sd {secs['sd']:.2f} "
            f"[{secs['interval'][1]:.2f}, {secs['interval'][2]:.2f}] (95% intervals of the mean)")


def _threads_cell(record: Any) -> str:
    used = record.metrics.get("threads") or {}
    if not used:
        return "-"
    # None: the framework has no such pool (XLA has no inter-op pool).
    return "/".join("-" if used.get(k, "?") is None else str(used.get(k, "?")) for k in ("intra_op", "inter_op"))


def run(args: argparse.Namespace) -> int:
    from dltune._bench import NOISY_TIMING_CV, benchmark
    from dltune._storage_url import resolve_storage
    from dltune._validation import check_int, check_out_file
    from dltune.data import dataset_kind

    check_int("repeats", args.repeats, 1, 1000)
    check_int("seeds", args.seeds, 1, 1000)
    frameworks = frameworks_for(args.frameworks)
    if not frameworks:
        from dltune._errors import BackendUnavailableError

        raise BackendUnavailableError("No backend is available here; see `dltune env status`.")
    if args.out:
        check_out_file("out", args.out)  # not after the runs: their records would be lost
    storage = resolve_storage(args.storage)
    workload = load_workload(args)
    # A preset is the published one for the data's kind (its shape), known once it is loaded.
    configs = configs_from_args(args, frameworks, dataset_kind(workload.dataset.input_shape))
    records = benchmark(workload, configs, repeats=args.repeats, seeds=args.seeds,
                        progress=not args.quiet, fault=args.fault, storage=storage)
    unsaved = save_or_fall_back(records, args.out) if args.out else None
    if args.json:
        print_json([r.to_dict() for r in records])
        if unsaved:
            raise DltuneError(unsaved)
        return 0 if all(r.ok for r in records) else 1
    print(f"{workload.dataset.summary()}; model {workload.model.name} "
          f"({workload.model.param_count:,d} parameters)")
    rows = []
    for record in records:
        row = record.summary_row()
        row["framework"] = framework_label(record.framework)
        row["threads"] = _threads_cell(record)
        rows.append(row)
    print(format_table(rows, table_columns(rows)))
    for record in records:
        if record.metrics.get("seeds"):
            print(seed_line(record))
    for record in records:
        if not record.ok:
            logger.warning("%s: failed: %s", record.framework, record.error["message"])
        elif record.metrics.get("timing_noisy"):
            logger.warning("%s: training times vary by %.0f%% (coefficient of variation; above "
                           "%.0f%% even measured twice): the machine is busy or the run too short",
                           record.framework, 100 * record.metrics["timing_cv"],
                           100 * NOISY_TIMING_CV)
    if args.out and not unsaved:
        print(f"records saved to {args.out}")
    if storage is not None:
        from dltune.measure._store import BENCH_PREFIX, study_name

        print(f"{storage_line(storage)} (study {study_name(workload.name, BENCH_PREFIX)}, "
              "where dltune recommend fits on them)")
    else:
        print(storage_line(None))
    if unsaved:
        raise DltuneError(unsaved)
    return 0 if all(r.ok for r in records) else 1


def save_or_fall_back(records: list[Any], out: str) -> str | None:
    """Save the records to ``out``, or where that fails after all (the disk filled up during the
    runs) to a new file in the working folder, else in the temp folder. None when ``out`` was
    written; else one line that says why not and where the records are."""
    from dltune.measure import save_records

    try:
        save_records(records, out)
        return None
    except OSError as exc:
        failed = f"Could not write the records to {out!r} ({exc.strerror or type(exc).__name__})"
    name = (f"dltune-bench-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
            f"{'.csv' if Path(out).suffix == '.csv' else '.json'}")
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        try:
            return f"{failed}; saved them to {str(save_records(records, folder / name))!r} instead."
        except OSError:
            continue
    return f"{failed}, nor to {name} in the working folder or {tempfile.gettempdir()}."
