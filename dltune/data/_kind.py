"""A data set's modality (what one sample is) and its kind (which published presets fit it).

One sample is, in dltune's canonical layout (:mod:`dltune.models._layers`):
- ``image``: (C, H, W) floats, at least 8x8;
- ``tabular``: (F,) float features;
- ``tokens``: (T,) integer token ids in [0, vocabulary), held as floats;
- ``sequence``: (F, T) floats, channels first like every map; users pass (N, T, F).
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

from dltune._validation import check_choice

__all__ = ["MODALITIES", "check_modality", "dataset_kind", "describe_data", "describe_modalities",
           "modality_readings", "user_shape"]

MODALITIES = ("image", "tabular", "tokens", "sequence")

# What a sample of each modality is, in the layout users pass it.
_NOUNS = {"image": "images (C, H, W)", "tabular": "tabular rows (F,)", "tokens": "token ids (T,)",
          "sequence": "sequences (T, F)"}

#: The smallest image side the presets take; a flat square array of a smaller side is not an image.
MIN_IMAGE_SIDE = 8


def check_modality(value: str) -> str:
    return check_choice("modality", value, MODALITIES)


def modality_readings(sample_shape: Sequence[int], integer: bool) -> tuple[str, ...]:
    """The modalities an array of samples of ``sample_shape`` (without N) can be read as, its
    default reading first; ``integer`` says whether it holds an integer dtype.

    (C, H, W) is an image; a square (H, W) is a grey image, or a sequence for a model that takes
    sequences, and any other (T, F) a sequence (a (20, 16) array is not silently an image); (F,)
    is token ids when integer, else features, and also a flat image when F is the square of 8 or more.
    """
    shape = tuple(int(v) for v in sample_shape)
    if len(shape) == 3:
        return ("image",)
    if len(shape) == 2:
        return ("image", "sequence") if shape[0] == shape[1] else ("sequence",)
    if len(shape) == 1:
        side = int(round(shape[0] ** 0.5))
        flat_image = ("image",) if side * side == shape[0] and side >= MIN_IMAGE_SIDE else ()
        return (("tokens", "tabular") if integer else ("tabular",)) + flat_image
    return ()


def user_shape(modality: str, input_shape: Sequence[int]) -> tuple[int, ...]:
    """A canonical sample shape as users pass it: a sequence's (F, T) as (T, F)."""
    shape = tuple(int(v) for v in input_shape)
    return shape[::-1] if modality == "sequence" else shape


def describe_modalities(modalities: Sequence[str]) -> str:
    """``images (C, H, W) or tabular rows (F,)``: what a model taking ``modalities`` takes."""
    return " or ".join(_NOUNS[m] for m in modalities)


def describe_data(modality: str, input_shape: Sequence[int]) -> str:
    """``sequences (T, F) of shape (20, 16)``: a data set's samples, in the users' layout."""
    return f"{_NOUNS[modality]} of shape {user_shape(modality, input_shape)}"


def dataset_kind(input_shape: int | Sequence[int]) -> str:
    """``cifar10`` for colour (3-channel) images, ``mnist`` for any other data.

    The kind names the published presets that fit the data (``TrainConfig.preset``'s
    ``dataset``): it depends on the samples' canonical shape (an int: an image's channels), not
    on the data set's name, so a 3-channel synthetic set or user arrays get CIFAR-10's presets
    like ``cifar10`` does, and tabular, token and sequence data MNIST's.
    """
    if isinstance(input_shape, Integral):
        return "cifar10" if input_shape == 3 else "mnist"
    shape = tuple(int(v) for v in input_shape)
    return "cifar10" if len(shape) == 3 and shape[0] == 3 else "mnist"
