"""A workload: the data set and the model to train on it, with meta-features for surrogates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dltune._errors import ParameterError
from dltune.models import MODEL_PRESETS, ModelSpec, build_model

__all__ = ["Workload", "as_workload", "default_model", "model_takes"]

# The preset a workload gets where none is named: the study's LeNet for images, else the first
# preset made for the data's modality alone (its registry order).
_DEFAULT_IMAGE_MODEL = "lenet"


def default_model(modality: str) -> str | None:
    """The preset for data of ``modality`` when no model is named; None where no preset takes it."""
    if modality == "image":
        return _DEFAULT_IMAGE_MODEL
    dedicated = [n for n, p in MODEL_PRESETS.items() if tuple(p.modalities) == (modality,)]
    takers = [n for n, p in MODEL_PRESETS.items() if modality in p.modalities]
    return (dedicated or takers or [None])[0]


def model_takes(model: str | ModelSpec) -> tuple[str, ...]:
    """The modalities a preset takes (its declared ones) or a spec takes (by its input's rank:
    (C, H, W) images, (F, T) sequences, (T,) token ids into an Embedding, else (F,) rows);
    none for an unknown name."""
    if isinstance(model, ModelSpec):
        rank = len(model.input_shape)
        if rank in (2, 3):
            return ("sequence",) if rank == 2 else ("image",)
        return ("tokens",) if model.layers and model.layers[0].kind == "embedding" else ("tabular",)
    preset = MODEL_PRESETS.get(model)
    return tuple(preset.modalities) if preset is not None else ()


def _model_for(model: str | ModelSpec | None, data: Any) -> ModelSpec:
    """``model`` built for ``data``; a model that does not take the data's modality is refused
    in one line naming both (before its layers would fail on the shape)."""
    from dltune.data import describe_data, describe_modalities

    model = default_model(data.modality) if model is None else model
    if model is None:
        raise ParameterError(
            f"The data are {describe_data(data.modality, data.input_shape)}, which no model preset "
            "takes: pass your own model (a ModelSpec; on the command line, --model-file)."
        )
    takes = model_takes(model)
    if takes and data.modality not in takes:
        fitting = ", ".join(n for n, p in MODEL_PRESETS.items() if data.modality in p.modalities)
        raise ParameterError(
            f"The model {model.name if isinstance(model, ModelSpec) else model!r} takes "
            f"{describe_modalities(takes)}; the data are "
            f"{describe_data(data.modality, data.input_shape)}"
            + (f" (models that take them: {fitting})." if fitting else ".")
        )
    vocab = data.vocab_size if data.modality == "tokens" else None
    return build_model(model, data.input_shape, data.num_classes, vocab_size=vocab)


@dataclass(frozen=True, eq=False)
class Workload:
    """What to train: a :class:`~dltune.data.Dataset` and a :class:`~dltune.models.ModelSpec`."""

    dataset: Any
    model: ModelSpec
    metric: str = "accuracy"

    @classmethod
    def from_name(cls, dataset: str = "digits", model: str | ModelSpec | None = None,
                  **dataset_params: Any) -> Workload:
        """A registered data set (``digits``, ``breast_cancer``, ``synthetic_sequence``, ...) and a
        model preset or spec (None: :func:`default_model` for the data's modality)."""
        from dltune.data import load_dataset

        data = load_dataset(dataset, **dataset_params)
        return cls(data, _model_for(model, data))

    @classmethod
    def from_arrays(cls, x_train, y_train, x_test, y_test, model: str | ModelSpec | None = None,
                    name: str = "arrays") -> Workload:
        """User arrays (see :func:`dltune.data.from_arrays` for the accepted layouts), read as
        the first modality the model takes that their shape allows (a (N, 64) array is flat 8x8
        images for ``lenet`` and ``mlp``, 64 features for ``tabular_mlp``), else as their
        default reading, which a model that does not take it refuses."""
        from dltune.data import array_modalities, from_arrays

        readings = array_modalities(x_train)
        model = default_model(readings[0]) if model is None else model
        modality = next((m for m in model_takes(model) if m in readings), readings[0])
        data = from_arrays(x_train, y_train, x_test, y_test, name=name, modality=modality)
        return cls(data, _model_for(model, data))

    @property
    def name(self) -> str:
        return f"{self.dataset.name}-{self.model.name}"

    def meta_features(self) -> dict[str, Any]:
        """Data set meta-features (its modality and shape, classes) and landmarks plus the
        model's size, cost, family and input shape (:func:`dltune.models.model_features`)."""
        from dltune.models import model_features

        features = dict(self.dataset.meta_features())
        features.update(model_features(self.model))
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


def as_workload(workload: Any, model: str | ModelSpec | None = None) -> Workload:
    """Accept a Workload, a data set name, a tuple of four arrays ``(x_train, y_train, x_test,
    y_test)``, or a pair ``(x, y)``, of which :func:`dltune.data.holdout_split` holds out a
    stratified 20 % for testing; ``model`` None is the data's :func:`default_model`."""
    if isinstance(workload, Workload):
        return workload
    if isinstance(workload, str):
        return Workload.from_name(workload, model)
    if isinstance(workload, (tuple, list)) and len(workload) == 4:
        return Workload.from_arrays(*workload, model=model)
    if isinstance(workload, (tuple, list)) and len(workload) == 2:
        from dltune.data import holdout_split

        return Workload.from_arrays(*holdout_split(*workload), model=model)
    got = f"a {type(workload).__name__} of {len(workload)}" if isinstance(workload, (tuple, list)) \
        else type(workload).__name__
    raise ParameterError(
        "The 'workload' parameter must be a Workload, a data set name, a tuple "
        f"(x_train, y_train, x_test, y_test) or a pair (x, y). Got {got} instead."
    )
