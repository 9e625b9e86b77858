"""How the surrogates improve with the number of workloads they learn from, and the load noise.

    python benchmarks/surrogate_learning_curve.py [--draws N]

Leave-one-workload-out on the shipped knowledge base, as ``dltune kb validate`` does, but each
held-out workload is predicted from a random 6, 9, 13, 20 or 27 (time: 6, 9, 13) of the other workloads (``--draws``
draws each) as well as from all of them: the accuracy order model's Spearman correlation (which
alone decides the ranking; accuracy does not depend on the machine, so every workload counts),
and the training-time cost model's MAPE (the point prediction, with the epochs each run
trained) over the workloads of the machine most records come from (the cost model alone, fitted
on that machine's runs: it has no machine factors). Then, over those runs predicted from all
other workloads of that machine, the training-time error grouped by the machine's 1-minute
load when each run started (``kb.load_1m``), and by framework x model x threads.
Deterministic: no training runs, the records are the shipped ones.
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=3)
    args = parser.parse_args()
    from scipy.stats import spearmanr
    from sklearn.ensemble import HistGradientBoostingRegressor

    from dltune.kb import read_jsonl, shipped_kb_path
    from dltune.kb._store import load_shipped_records
    from dltune.surrogate import PerformanceModel, record_row, usable_records
    from dltune.surrogate._accuracy import workload_ranks
    from dltune.surrogate._features import FeatureEncoder
    from dltune.surrogate._machines import machine_key, reference_machine
    from dltune.surrogate._records import epochs_ran, workload_label

    data = usable_records(load_shipped_records())
    rows = [record_row(d) for d in data]
    encoder = FeatureEncoder().fit(rows)
    X = encoder.transform(rows)
    X_time = encoder.transform([epochs_ran(d, r) for d, r in zip(data, rows, strict=True)])
    accuracy, time_model, _ = PerformanceModel()._estimators(encoder)
    seconds = np.array([d["metrics"]["train_time_s"] for d in data])
    acc = np.array([d["metrics"]["test_accuracy"] for d in data])
    target = accuracy._to_target(X, acc)
    trees = list(accuracy.tree_columns)
    threads = encoder.feature_names_.index("intra_threads")
    groups = np.array([workload_label(d) for d in data])
    labels = sorted(set(groups))
    machines = np.array([machine_key(d["hardware"]) for d in data])
    reference = reference_machine(machines)
    on_reference = machines == reference
    reference_labels = sorted(set(groups[on_reference]))

    def time_fold(held: str, others: list[str]) -> np.ndarray:
        train, test = np.isin(groups, others) & on_reference, (groups == held) & on_reference
        coefs = time_model._fit_costs(X_time[train], seconds[train])
        return time_model._modelled(X_time[test], coefs)

    def order_fold(held: str, others: list[str]) -> float:
        train, test = np.isin(groups, others), groups == held
        order = HistGradientBoostingRegressor(
            max_iter=accuracy.max_iter, learning_rate=accuracy.learning_rate,
            max_leaf_nodes=accuracy.max_leaf_nodes, min_samples_leaf=accuracy.min_samples_leaf,
            l2_regularization=accuracy.l2_regularization, early_stopping=False,
            random_state=accuracy.random_state).fit(X[train][:, trees], workload_ranks(target[train], groups[train]))
        rho = spearmanr(-order.predict(X[test][:, trees]), acc[test]).statistic
        return float(rho)

    rng = np.random.default_rng(0)
    print(f"accuracy order model, {len(labels)} workloads: other workloads | Spearman mean / min")
    for k in sorted({min(k, len(labels) - 1) for k in (6, 9, 13, 20, 27, len(labels) - 1)}):
        draws = 1 if k == len(labels) - 1 else args.draws
        means, mins = [], []
        for _ in range(draws):
            rhos = []
            for held in labels:
                others = [w for w in labels if w != held]
                picked = others if k == len(others) else list(rng.choice(others, k, replace=False))
                rhos.append(order_fold(held, picked))
            means.append(np.mean(rhos))
            mins.append(np.min(rhos))
        print(f"{k:15d} | {np.mean(means):.2f} / {np.mean(mins):.2f}   ({draws} draw{'s' if draws > 1 else ''})")

    print(f"\ntraining-time cost model, the {len(reference_labels)} workloads of {reference}: "
          "other workloads | time MAPE %")
    full_prediction = np.zeros(len(data))
    for k in sorted({min(k, len(reference_labels) - 1) for k in (6, 9, 13, len(reference_labels) - 1)}):
        draws = 1 if k == len(reference_labels) - 1 else args.draws
        mapes = []
        for _ in range(draws):
            ape = np.full(len(data), np.nan)
            for held in reference_labels:
                others = [w for w in reference_labels if w != held]
                picked = others if k == len(others) else list(rng.choice(others, k, replace=False))
                test = (groups == held) & on_reference
                predicted = time_fold(held, picked)
                ape[test] = np.abs(predicted - seconds[test]) / seconds[test]
                if k == len(others):
                    full_prediction[test] = predicted
            mapes.append(100 * np.nanmean(ape))
        print(f"{k:15d} | {np.mean(mapes):11.1f}   ({draws} draw{'s' if draws > 1 else ''})")

    loads = {e["id"]: e["kb"].get("load_1m") for e in read_jsonl(shipped_kb_path())}
    load = np.array([loads.get(d["id"], np.nan) for d in data], dtype=float)
    with np.errstate(divide="ignore"):
        log_ratio = np.log(seconds / full_prediction)
    ape = np.abs(full_prediction - seconds) / seconds
    load = np.where(on_reference, load, np.nan)
    print("\n1-minute load at run start | runs | time MAPE % | median measured/predicted")
    for low, high in ((0, 1.2), (1.2, 1.6), (1.6, 2.0), (2.0, np.inf)):
        sel = (load >= low) & (load < high)
        if sel.any():
            print(f"{low:.1f}-{high:<4.1f}                   | {sel.sum():4d} | {100 * ape[sel].mean():11.1f} |"
                  f" {np.exp(np.median(log_ratio[sel])):.2f}")

    print("\nframework  model        threads | runs | time MAPE %")
    keys = [(d["config"]["framework"], d["workload"]["model"], 1 if X_time[i, threads] <= 1 else 2)
            if on_reference[i] else None for i, d in enumerate(data)]
    for key in sorted(set(keys) - {None}):
        sel = np.array([k == key for k in keys])
        print(f"{key[0]:10s} {key[1]:12s} {key[2]:7d} | {sel.sum():4d} | {100 * ape[sel].mean():11.1f}")


if __name__ == "__main__":
    main()
