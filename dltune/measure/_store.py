"""Study and bench records in an Optuna storage: one trial per measurement, tagged with its phases.

Records live in the study ``dltune-study:<workload>`` (directions: maximise accuracy, minimise
training time) as trials whose user attributes hold the whole :class:`Measurement` (written by
:mod:`dltune.measure._codec`, as tuning's trials hold theirs), the study phases (``phase``,
``phases``), a resume key (``key``) and a label. The Optuna dashboard and the surrogates read
them like any other trial.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dltune._errors import ParameterError
from dltune._storage_url import _scrub, default_storage_url
from dltune.measure._codec import decode_record, encode
from dltune.measure._record import Measurement
from dltune.measure._storage import open_storage

__all__ = [
    "BENCH_PREFIX",
    "STUDY_PREFIX",
    "StudyRecord",
    "StudyStore",
    "load_storage_records",
    "study_name",
]

STUDY_PREFIX = "dltune-study:"
#: The studies ``dltune bench`` stores its records in, one per workload: read by the surrogates
#: (``recommend``), not by the study's report.
BENCH_PREFIX = "dltune-bench:"


def study_name(workload_name: str, prefix: str = STUDY_PREFIX) -> str:
    """The study holding a workload's study records (``prefix`` :data:`BENCH_PREFIX`: its
    ``dltune bench`` records)."""
    return f"{prefix}{workload_name}"


@dataclass
class StudyRecord:
    """A measurement with the study phases it belongs to."""

    measurement: Measurement
    phases: list[str] = field(default_factory=list)
    key: str | None = None
    label: str | None = None
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = self.measurement.to_dict()
        data["study"] = {"phases": self.phases, "key": self.key, "label": self.label,
                         "source": self.source}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StudyRecord:
        """A record as :meth:`to_dict` writes it: the measurement's fields and ``study``."""
        measurement = Measurement.from_dict(data)
        extra = data.get("study") or {}
        if not isinstance(extra, dict):
            raise ParameterError(
                f"The 'study' field of a study record must be a dict of its phases, key, label and "
                f"source. Got {type(extra).__name__} instead.")
        phases = extra.get("phases") or []
        if not isinstance(phases, list):
            raise ParameterError(f"The 'study.phases' field of a study record must be a list of "
                                 f"phase names. Got {type(phases).__name__} instead.")
        return cls(measurement, list(phases), extra.get("key"), extra.get("label"), extra.get("source"))


def _optuna():
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _distributions():
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from dltune.config import OPTIMIZERS

    return {
        "optimizer": CategoricalDistribution(list(OPTIMIZERS)),
        "learning_rate": FloatDistribution(1e-7, 10.0, log=True),
        "batch_size": IntDistribution(1, 65536, log=True),
        "epochs": IntDistribution(1, 10000),
    }


class StudyStore:
    """The Optuna study that holds one workload's study records (or, with ``prefix``
    :data:`BENCH_PREFIX`, its ``dltune bench`` records). Not thread-safe.

    The storage is opened as ``tune`` opens it (:func:`dltune.tuning.open_storage`): a URL that
    is no database URL raises ``ParameterError``, one that cannot be reached ``StorageError``.
    """

    def __init__(self, storage: str | None, workload_name: str, prefix: str = STUDY_PREFIX) -> None:
        optuna = _optuna()
        self.storage_url = storage or default_storage_url()
        self.name = study_name(workload_name, prefix)
        # As tune opens it: the URL checked, PostgreSQL's installed driver named, a clean error.
        opened = open_storage(self.storage_url, heartbeat=False)
        try:
            self.study = optuna.create_study(
                storage=opened, study_name=self.name,
                directions=["maximize", "minimize"], load_if_exists=True,
            )
        except (ValueError, ImportError) as exc:
            raise ParameterError(
                f"The 'storage' parameter must be an Optuna storage URL such as "
                f"'sqlite:///dltune.db'. Could not open it: {_scrub(str(exc), self.storage_url)}"
            ) from None
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.study.set_metric_names(["accuracy", "train_time_s"])

    def stored(self) -> dict[str, Any]:
        """Key -> COMPLETE trial, for every record already measured (failed ones are retried)."""
        from optuna.trial import TrialState

        out = {}
        for trial in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            key = trial.user_attrs.get("key")
            if key:
                out[key] = trial
        return out

    def add(self, record: Measurement, key: str, phases: list[str], label: str, wall_s: float) -> None:
        """Store one finished measurement as a trial (COMPLETE if it ran, FAIL otherwise)."""
        optuna = _optuna()
        from optuna.trial import TrialState

        config = record.config
        dists = _distributions()
        # The framework is a user attribute, not a parameter: Optuna fixes a categorical's choices
        # for the life of a study, and the registry gains frameworks.
        params = {
            "optimizer": config["optimizer"],
            "learning_rate": float(config["learning_rate"]),
            "batch_size": int(config["batch_size"]),
            "epochs": int(config["epochs"]),
        }
        ok = record.ok and record.metrics.get("test_accuracy") is not None
        curves = record.metrics.get("curves") or []
        trial = optuna.trial.create_trial(
            state=TrialState.COMPLETE if ok else TrialState.FAIL,
            values=[float(record.metrics["test_accuracy"]), float(record.metrics["train_time_s"])]
            if ok else None,
            params=params,
            distributions={k: dists[k] for k in params},
            user_attrs={
                **encode(record),
                "key": key,
                "framework": config["framework"],
                "phase": phases[0],
                "phases": list(phases),
                "label": label,
                "wall_s": wall_s,
                "fail_reason": None if ok else (record.error or {}).get("message"),
            },
            intermediate_values={int(c["epoch"]): float(c["test_accuracy"]) for c in curves
                                 if c.get("test_accuracy") is not None} if ok else None,
        )
        self.study.add_trial(trial)

    def set_attr(self, name: str, value: Any) -> None:
        self.study.set_user_attr(name, value)

    def merge_membership(self, membership: dict[str, list[str]]) -> None:
        """Remember which phases each key belongs to (a resumed plan may add phases)."""
        merged = {k: list(v) for k, v in (self.study.user_attrs.get("membership") or {}).items()}
        for key, phases in membership.items():
            merged[key] = merged.get(key, []) + [p for p in phases if p not in merged.get(key, [])]
        self.study.set_user_attr("membership", merged)

    def records(self) -> list[StudyRecord]:
        return _study_records(self.study)


def _study_records(study, default_phase: str | None = None) -> list[StudyRecord]:
    """The study's records; of several for one key (failed, then retried) the last ok one."""
    membership = study.user_attrs.get("membership") or {}
    out: list[StudyRecord] = []
    by_key: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        if not trial.state.is_finished():
            continue
        record = decode_record(trial.user_attrs)
        if record is None:
            continue
        key = trial.user_attrs.get("key")
        phases = list(trial.user_attrs.get("phases") or [])
        for phase in membership.get(key, []):
            if phase not in phases:
                phases.append(phase)
        if not phases and default_phase:
            phases = [default_phase]
        rec = StudyRecord(record, phases, key, trial.user_attrs.get("label"), study.study_name)
        if key is not None and key in by_key:
            if record.ok or not out[by_key[key]].measurement.ok:
                out[by_key[key]] = rec
            continue
        if key is not None:
            by_key[key] = len(out)
        out.append(rec)
    return out


def load_storage_records(storage: str, workloads: Iterable[str] | None = None) -> list[StudyRecord]:
    """Every record in ``storage``: the study's own, and tuning trials tagged ``tune``
    (not ``dltune bench``'s: they are no part of a study).

    Raises ``ParameterError`` for a URL that is no database URL, ``StorageError`` for one that
    cannot be reached (opened as :func:`dltune.tuning.open_storage` opens it).
    """
    optuna = _optuna()
    opened = open_storage(storage, heartbeat=False)
    try:
        names = optuna.get_all_study_names(storage=opened)
    except Exception as exc:  # noqa: BLE001 - any driver error means the URL is unusable
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ParameterError(_scrub(
            f"The 'storage' parameter must be a readable Optuna storage URL. Could not read "
            f"{storage!r}: {type(exc).__name__}: {first}", storage)) from None
    wanted = set(workloads) if workloads else None
    records: list[StudyRecord] = []
    for name in names:
        if name.startswith(BENCH_PREFIX):
            continue
        study = optuna.load_study(study_name=name, storage=opened)
        phase = None if name.startswith(STUDY_PREFIX) else "tune"
        for rec in _study_records(study, phase):
            if wanted is None or rec.measurement.workload.get("name") in wanted:
                records.append(rec)
    return records
