"""Each framework's own default settings, and the presets the study crosses them with."""

from __future__ import annotations

from typing import Any

from dltune.config import TrainConfig, available_presets

__all__ = ["STUDY_FRAMEWORKS", "MXNET_GLUON_DEFAULTS", "own_preset", "preset_config", "study_presets"]

# The four frameworks of the published study plus MXNet; "all" in the CLI means these.
STUDY_FRAMEWORKS = ("torch", "tensorflow", "mxnet", "theano")

# The study published no MXNet configuration. dltune uses the defaults of MXNet's own Gluon MNIST
# example (apache/mxnet example/gluon/mnist/mnist.py: --batch-size 100, --epochs 10, --lr 0.1,
# --momentum 0.9, SGD with momentum) and names that preset "mxnet".
MXNET_GLUON_DEFAULTS: dict[str, Any] = dict(
    optimizer="momentum", learning_rate=0.1, momentum=0.9, batch_size=100, epochs=10
)

# Frameworks without a published preset of their own borrow the nearest one.
_BORROWED = {"pytensor": "theano", "numpy": "torch"}


def study_presets(dataset: str = "mnist") -> list[str]:
    """Preset names of the cross-defaults matrix: the published ones plus ``mxnet``."""
    names = available_presets(dataset)
    if dataset == "mnist":
        names.append("mxnet")
    return names


def own_preset(framework: str, dataset: str = "mnist") -> str:
    """The preset that counts as ``framework``'s own default settings."""
    if framework in study_presets(dataset):
        return framework
    borrowed = _BORROWED.get(framework, "caffe")
    return borrowed if borrowed in study_presets(dataset) else study_presets(dataset)[0]


def preset_config(preset: str, framework: str, dataset: str = "mnist") -> TrainConfig:
    """``framework`` trained with ``preset``'s settings (including MXNet's Gluon defaults)."""
    if preset == "mxnet" and dataset == "mnist":
        return TrainConfig(framework=framework, preset_name="mxnet").replace(**MXNET_GLUON_DEFAULTS)
    return TrainConfig.preset(preset, dataset, framework=framework)
