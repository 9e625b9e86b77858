"""A data set's kind: which of the study's published presets fit it, MNIST's or CIFAR-10's."""

from __future__ import annotations

__all__ = ["dataset_kind"]


def dataset_kind(channels: int) -> str:
    """``cifar10`` for colour (3-channel) images, ``mnist`` for any other (grey-scale) data.

    The kind names the published presets that fit the data (``TrainConfig.preset``'s
    ``dataset``): it depends on the images' channels, not on the data set's name, so a 3-channel
    synthetic set or user arrays get CIFAR-10's presets like ``cifar10`` does.
    """
    return "cifar10" if int(channels) == 3 else "mnist"
