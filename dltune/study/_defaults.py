"""The presets the study crosses every framework with; each framework's own is
:func:`dltune.config.default_preset`."""

from __future__ import annotations

from typing import Any

from dltune.config import TrainConfig, available_presets

__all__ = ["STUDY_FRAMEWORKS", "MXNET_GLUON_DEFAULTS", "preset_config", "study_presets"]

# The published study's frameworks plus MXNet and JAX (today's third choice); "all" in the CLI
# means these, each left out with a note where it is not installed.
STUDY_FRAMEWORKS = ("torch", "tensorflow", "mxnet", "theano", "jax")

# The study published no MXNet configuration. Its cross-defaults matrix adds the defaults of MXNet's
# own Gluon MNIST example (apache/mxnet example/gluon/mnist/mnist.py: --batch-size 100, --epochs
# 10, --lr 0.1, --momentum 0.9, SGD with momentum) as the preset "mxnet"; MXNet's own defaults
# stay Caffe's (default_preset), the ones the knowledge base measured.
MXNET_GLUON_DEFAULTS: dict[str, Any] = dict(
    optimizer="momentum", learning_rate=0.1, momentum=0.9, batch_size=100, epochs=10
)


def study_presets(dataset: str = "mnist") -> list[str]:
    """Preset names of the cross-defaults matrix: the published ones plus ``mxnet``."""
    names = available_presets(dataset)
    if dataset == "mnist":
        names.append("mxnet")
    return names


def preset_config(preset: str, framework: str, dataset: str = "mnist") -> TrainConfig:
    """``framework`` trained with ``preset``'s settings (including MXNet's Gluon defaults)."""
    if preset == "mxnet" and dataset == "mnist":
        return TrainConfig(framework=framework, preset_name="mxnet").replace(**MXNET_GLUON_DEFAULTS)
    return TrainConfig.preset(preset, dataset, framework=framework)
