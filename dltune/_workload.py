"""A workload: the data set and the model to train on it, with meta-features for surrogates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dltune.models import ModelSpec, build_model

__all__ = ["Workload", "as_workload"]


@dataclass(frozen=True, eq=False)
class Workload:
    """What to train: a :class:`~dltune.data.Dataset` and a :class:`~dltune.models.ModelSpec`."""

    dataset: Any
    model: ModelSpec
    metric: str = "accuracy"

    @classmethod
    def from_name(cls, dataset: str = "digits", model: str = "lenet", **dataset_params: Any) -> Workload:
        """A registered data set (``digits``, ``synthetic``, ``mnist``, ...) and a model preset."""
        from dltune.data import load_dataset

        data = load_dataset(dataset, **dataset_params)
        return cls(data, build_model(model, data.input_shape, data.num_classes))

    @classmethod
    def from_arrays(cls, x_train, y_train, x_test, y_test, model: str = "lenet", name: str = "arrays") -> Workload:
        """User arrays (see :func:`dltune.data.from_arrays` for the accepted layouts)."""
        from dltune.data import from_arrays

        data = from_arrays(x_train, y_train, x_test, y_test, name=name)
        return cls(data, build_model(model, data.input_shape, data.num_classes))

    @property
    def name(self) -> str:
        return f"{self.dataset.name}-{self.model.name}"

    def meta_features(self) -> dict[str, Any]:
        """Data set meta-features and landmarks plus the model's size and cost."""
        features = dict(self.dataset.meta_features())
        features.update(self.model.cost_features())
        return features

    def to_record(self) -> dict[str, Any]:
        """The ``workload`` part of a measurement record."""
        return {
            "name": self.name,
            "dataset": self.dataset.name,
            "dataset_params": dict(self.dataset.params),
            "fingerprint": self.dataset.fingerprint(),
            "model": self.model.name,
            "model_spec": self.model.to_dict(),
            "meta": self.meta_features(),
        }


def as_workload(workload: Any, model: str | None = None) -> Workload:
    """Accept a Workload, a data set name, a tuple of four arrays ``(x_train, y_train, x_test,
    y_test)``, or a pair ``(x, y)``, of which :func:`dltune.data.holdout_split` holds out a
    stratified 20 % for testing."""
    if isinstance(workload, Workload):
        return workload
    if isinstance(workload, str):
        return Workload.from_name(workload, model or "lenet")
    if isinstance(workload, (tuple, list)) and len(workload) == 4:
        return Workload.from_arrays(*workload, model=model or "lenet")
    if isinstance(workload, (tuple, list)) and len(workload) == 2:
        from dltune.data import holdout_split

        return Workload.from_arrays(*holdout_split(*workload), model=model or "lenet")
    from dltune._errors import ParameterError

    got = f"a {type(workload).__name__} of {len(workload)}" if isinstance(workload, (tuple, list)) \
        else type(workload).__name__
    raise ParameterError(
        "The 'workload' parameter must be a Workload, a data set name, a tuple "
        f"(x_train, y_train, x_test, y_test) or a pair (x, y). Got {got} instead."
    )
