"""The accuracy surrogate predicts row by row; re-ranking within a workload is an explicit step."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from dltune._errors import ParameterError
from dltune.kb import RecordStore
from dltune.surrogate import PerformanceModel, record_row
from dltune.surrogate._accuracy import MIN_ORDER_ROWS, _ranks
from dltune.surrogate._records import workload_label

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fitted(tiny_kb):
    """A model fitted on the tiny knowledge base, and one of its workloads' candidates: its
    measured configurations at several learning rates (enough rows for the order model)."""
    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    model = PerformanceModel(max_iter=40).fit(records)
    label = Counter(workload_label(r) for r in records).most_common(1)[0][0]
    rows = []
    for r in (r for r in records if workload_label(r) == label):
        for factor in (0.01, 0.1, 1.0, 3.0):
            row = record_row(r)
            rows.append(dict(row, config=dict(row["config"], learning_rate=row["config"]["learning_rate"] * factor)))
    assert len(rows) >= MIN_ORDER_ROWS
    return model, rows, model.encoder_.transform(rows)


def test_a_rows_accuracy_is_the_same_alone_in_a_batch_and_shuffled(fitted):
    model, _, X = fitted
    acc = model.accuracy_
    assert len(acc.workload_columns) and acc.order_ is not None  # the order model is there
    batch = acc.predict_interval(X)
    alone = np.array([[v[0] for v in acc.predict_interval(X[i:i + 1])] for i in range(len(X))])
    np.testing.assert_array_equal(alone, np.column_stack(batch))
    perm = np.random.default_rng(0).permutation(len(X))
    for shuffled, ordered in zip(acc.predict_interval(X[perm]), batch, strict=True):
        np.testing.assert_array_equal(shuffled, ordered[perm])
    np.testing.assert_array_equal(acc.predict(X), batch[0])
    np.testing.assert_array_equal(acc.predict(X[perm]), batch[0][perm])


def test_the_workload_step_reassigns_the_rows_values_in_the_order_models_order(fitted):
    model, rows, X = fitted
    acc = model.accuracy_
    point_t = acc.predict_target(X)[0]
    ranked_t = acc.rank_within_workloads(X, point_t)
    # The same values, reassigned: lowest error ratio to the row the order ranks first.
    np.testing.assert_array_equal(np.sort(ranked_t), np.sort(point_t))
    assert not np.array_equal(ranked_t, point_t)  # it moves something here
    key = acc.order_.predict(acc._trees_X(X))
    transferred = acc._transfer_order(X)  # the measured workloads' rank models weigh in too
    assert transferred is not None
    key = (1 - acc.transfer) * _ranks(key) + acc.transfer * _ranks(transferred)
    assert np.all(np.diff(ranked_t[np.argsort(key, kind="stable")]) >= 0)
    # As accuracies, with the interval stretched to hold the moved points; what
    # PerformanceModel.predict gives.
    point, low, high = acc.predict_interval_within_workloads(X)
    np.testing.assert_array_equal(point, acc._from_target(X, ranked_t))
    assert np.all((low <= point) & (point <= high))
    pred = model.predict(rows)
    for key, values in (("accuracy", point), ("accuracy_low", low), ("accuracy_high", high)):
        np.testing.assert_array_equal(pred[key], values)
    # Fewer rows of a workload than MIN_ORDER_ROWS: the rows' own values.
    few = X[:MIN_ORDER_ROWS - 1]
    np.testing.assert_array_equal(acc.rank_within_workloads(few, point_t[:MIN_ORDER_ROWS - 1]),
                                  point_t[:MIN_ORDER_ROWS - 1])
    with pytest.raises(ParameterError, match=r"The 'point' parameter must hold one value per row of X"):
        acc.rank_within_workloads(X, point_t[:3])
