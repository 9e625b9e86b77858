"""The configuration of one training run, and the study's framework default presets."""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from dltune._errors import ParameterError
from dltune._validation import check_choice, check_float, check_int
from dltune.config._threads import ThreadConfig

__all__ = ["LR_RANGES", "OPTIMIZERS", "LR_SCHEDULES", "PRESETS", "TrainConfig", "available_presets"]

OPTIMIZERS = ("sgd", "momentum", "adam")
# The usual learning rates of each optimizer (low, high): the knowledge base and the
# recommendation's candidates sample them log-uniformly, and the accuracy surrogate reads a
# learning rate as its position in its optimizer's range (momentum 0.9 takes steps ~10x an
# sgd step of the same rate, adam's are normalised): the same rate is not the same step.
LR_RANGES = {"sgd": (1e-2, 0.5), "momentum": (1e-3, 0.1), "adam": (1e-4, 1e-2)}
LR_SCHEDULES = ("constant", "inv", "step")
DEVICES = ("cpu", "cuda")
# Each float field's interval (check_float's arguments). A NaN or an infinity lies in none, and
# is refused when the TrainConfig is made: it would train on and record NaN.
FLOAT_RANGES: dict[str, dict[str, Any]] = {
    "learning_rate": dict(low=0.0, high=10.0, low_open=True),
    "momentum": dict(low=0.0, high=1.0, high_open=True),
    "weight_decay": dict(low=0.0, high=1.0),
    "lr_gamma": dict(low=0.0),
    "lr_power": dict(low=0.0),
    "timeout_s": dict(low=0.0, low_open=True),
}


@dataclass(frozen=True)
class TrainConfig:
    """How to train: framework, optimizer, schedule, batch size, epochs, seed, threads.

    Optimizers follow PyTorch's definitions in every backend: ``sgd`` (``momentum`` ignored),
    ``momentum`` (heavy ball, no dampening) and ``adam`` (betas 0.9 / 0.999, eps 1e-8).
    ``weight_decay`` adds ``weight_decay * w`` to each weight's gradient (L2).

    Learning-rate schedules, evaluated per iteration ``t`` (batches seen so far):
    ``constant``; ``inv`` (Caffe): ``lr * (1 + lr_gamma * t) ** -lr_power``; ``step``:
    ``lr * lr_gamma ** (epoch // lr_step_epochs)``.
    """

    framework: str = "torch"
    optimizer: str = "momentum"
    learning_rate: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 0.0
    batch_size: int = 64
    epochs: int = 5
    seed: int = 0
    lr_schedule: str = "constant"
    lr_gamma: float = 0.1
    lr_power: float = 0.75
    lr_step_epochs: int = 1
    early_stopping_patience: int | None = None
    device: str = "cpu"
    threads: ThreadConfig = field(default_factory=ThreadConfig)
    timeout_s: float = 3600.0
    preset_name: str | None = None

    def __post_init__(self) -> None:
        for name, interval in FLOAT_RANGES.items():
            value = getattr(self, name)
            if isinstance(value, numbers.Real) and not math.isfinite(value):
                check_float(name, value, **interval)

    def validate(self, frameworks: list[str] | None = None, max_cores: int | None = None) -> TrainConfig:
        """Check every field; return ``self``. ``frameworks`` is the allowed backend list."""
        if frameworks is not None:
            check_choice("framework", self.framework, frameworks)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        for name, interval in FLOAT_RANGES.items():
            check_float(name, getattr(self, name), **interval)
        check_int("batch_size", self.batch_size, 1, 65536)
        check_int("epochs", self.epochs, 1, 10000)
        check_int("seed", self.seed, 0, 2**32 - 1)
        check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        check_int("lr_step_epochs", self.lr_step_epochs, 1, None)
        if self.early_stopping_patience is not None:
            check_int("early_stopping_patience", self.early_stopping_patience, 1, None)
        check_choice("device", self.device, DEVICES)
        self.threads.validate(max_cores)
        return self

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with some fields changed (``threads`` may be a dict)."""
        if isinstance(changes.get("threads"), dict):
            changes["threads"] = ThreadConfig.from_dict(changes["threads"])
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            allowed = ", ".join(f.name for f in dataclasses.fields(self))
            raise ParameterError(
                f"Unknown TrainConfig field(s) {sorted(unknown)}. Allowed: {allowed}."
            )
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["threads"] = self.threads.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        return cls().replace(**data)

    @classmethod
    def preset(cls, name: str, dataset: str = "mnist", **overrides: Any) -> TrainConfig:
        """A framework's published default settings (see ``available_presets()``).

        Args:
            name: ``tensorflow``, ``caffe``, ``torch`` or ``theano``.
            dataset: ``mnist`` (the default, used for any small grey-scale data) or ``cifar10``.
            overrides: fields to change afterwards, e.g. ``framework="tensorflow"`` to train
                TensorFlow with Caffe's defaults.
        """
        check_choice("dataset", dataset, sorted({d for (_, d) in PRESETS}))
        check_choice("preset", name, available_presets(dataset))
        fields = dict(PRESETS[(name, dataset)])
        fields.setdefault("framework", name if name in ("tensorflow", "torch", "theano") else "torch")
        fields["preset_name"] = name
        return cls().replace(**fields).replace(**overrides)


# The study's defaults (shared/reference/framework_defaults.md); iteration counts are
# converted to epochs through the 55,000 / 60,000-image MNIST training set.
PRESETS: dict[tuple[str, str], dict[str, Any]] = {
    ("tensorflow", "mnist"): dict(optimizer="adam", learning_rate=1e-4, batch_size=50, epochs=18),
    ("caffe", "mnist"): dict(
        optimizer="momentum", learning_rate=0.01, momentum=0.9, weight_decay=5e-4,
        lr_schedule="inv", lr_gamma=1e-4, lr_power=0.75, batch_size=64, epochs=11,
    ),
    ("torch", "mnist"): dict(optimizer="sgd", learning_rate=0.05, batch_size=10, epochs=20),
    ("theano", "mnist"): dict(
        optimizer="sgd", learning_rate=0.1, batch_size=500, epochs=200, early_stopping_patience=10
    ),
    ("tensorflow", "cifar10"): dict(
        optimizer="sgd", learning_rate=0.1, batch_size=128, epochs=350,
        lr_schedule="step", lr_gamma=0.1, lr_step_epochs=350,
    ),
    ("caffe", "cifar10"): dict(
        optimizer="momentum", learning_rate=0.001, momentum=0.9, weight_decay=0.004,
        batch_size=100, epochs=10,
    ),
    ("torch", "cifar10"): dict(
        optimizer="sgd", learning_rate=0.001, batch_size=1, epochs=45,
        lr_schedule="inv", lr_gamma=5e-7, lr_power=1.0,
    ),
}


def available_presets(dataset: str = "mnist") -> list[str]:
    return sorted(name for (name, d) in PRESETS if d == dataset)


def default_preset(framework: str, dataset: str = "mnist") -> str:
    """The name of ``framework``'s own default preset for ``dataset`` (``mnist`` or ``cifar10``,
    :func:`dltune.data.dataset_kind`): its published one where the study has one, else Caffe's
    (MXNet, PyTensor, numpy, and Theano on CIFAR-10-like data).

    The one rule for a framework's own defaults: the knowledge base measured these on every
    workload (its records name them), ``recommend`` shows them, ``tune`` compares with them and
    ``dltune study`` runs them as its ``defaults`` phase.
    """
    return framework if framework in available_presets(dataset) else "caffe"
