"""TrainConfig: validation messages, presets from the study, serialisation."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dltune._errors import ParameterError
from dltune.config import PRESETS, ThreadConfig, TrainConfig, available_presets
from dltune.config._train_config import FLOAT_RANGES


def test_defaults_are_valid_and_round_trip():
    config = TrainConfig().validate(["torch", "tensorflow"])
    assert (config.optimizer, config.learning_rate, config.batch_size) == ("momentum", 0.05, 64)
    again = TrainConfig.from_dict(config.to_dict())
    assert again == config
    assert isinstance(again.threads, ThreadConfig)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"batch_size": 0}, "The 'batch_size' parameter must be an int in [1, 65536]. Got 0 instead."),
        ({"learning_rate": -0.1}, "The 'learning_rate' parameter must be a float in (0.0, 10.0]. Got -0.1 instead."),
        ({"optimizer": "rmsprop"}, "The 'optimizer' parameter must be one of {'sgd', 'momentum', 'adam'}. Got 'rmsprop' instead."),
        ({"framework": "caffe"}, "The 'framework' parameter must be one of {'torch', 'tensorflow'}. Got 'caffe' instead."),
        ({"momentum": 1.0}, "The 'momentum' parameter must be a float in [0.0, 1.0). Got 1.0 instead."),
        ({"epochs": 2.5}, "The 'epochs' parameter must be an int in [1, 10000]. Got 2.5 instead."),
        ({"batch_size": True}, "The 'batch_size' parameter must be an int in [1, 65536]. Got True instead."),
        ({"learning_rate": float("nan")}, "The 'learning_rate' parameter must be a float"),
        ({"lr_schedule": "cosine"}, "The 'lr_schedule' parameter must be one of"),
        ({"early_stopping_patience": 0}, "The 'early_stopping_patience' parameter must be an int in [1, inf)"),
        ({"device": "tpu"}, "The 'device' parameter must be one of {'cpu', 'cuda'}. Got 'tpu' instead."),
        ({"timeout_s": 0}, "The 'timeout_s' parameter must be a float in (0.0, inf)"),
    ],
)
def test_bad_values_name_parameter_range_and_value(changes, message):
    with pytest.raises(ParameterError) as info:
        TrainConfig(**changes).validate(["torch", "tensorflow"])
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), np.float32("nan")], ids=repr)
@pytest.mark.parametrize("name", list(FLOAT_RANGES))
def test_nan_and_infinity_are_refused_when_the_config_is_made(name, value):
    """Not only by ``validate``: a config of NaN would train on and record NaN."""
    assert isinstance(getattr(TrainConfig(), name), float)
    for make in (lambda: TrainConfig(**{name: value}), lambda: TrainConfig().replace(**{name: value}),
                 lambda: TrainConfig.from_dict({name: value})):
        with pytest.raises(ParameterError, match=rf"^The '{name}' parameter must be a float in .*\. "
                                                 rf"Got {re.escape(repr(value))} instead\.$"):
            make()


def test_threads_above_usable_cores_are_rejected():
    with pytest.raises(ParameterError, match=r"The 'threads' parameter must be an int in \[1, 2\]. Got 3"):
        TrainConfig(threads=ThreadConfig(intra_op=3)).validate(max_cores=2)
    with pytest.raises(ParameterError, match="'threads.cores'"):
        TrainConfig(threads=ThreadConfig(cores=4)).validate(max_cores=2)


def test_replace_rejects_unknown_fields_and_accepts_thread_dicts():
    config = TrainConfig().replace(threads={"intra_op": 1, "inter_op": 1})
    assert config.threads == ThreadConfig(intra_op=1, inter_op=1)
    with pytest.raises(ParameterError, match=r"Unknown TrainConfig field\(s\) \['lr'\]"):
        TrainConfig().replace(lr=0.1)


def test_presets_follow_the_study():
    caffe = TrainConfig.preset("caffe")
    assert (caffe.optimizer, caffe.learning_rate, caffe.momentum, caffe.weight_decay) == (
        "momentum", 0.01, 0.9, 5e-4,
    )
    assert (caffe.lr_schedule, caffe.lr_gamma, caffe.lr_power, caffe.batch_size) == ("inv", 1e-4, 0.75, 64)
    assert caffe.preset_name == "caffe" and caffe.framework == "torch"
    tf = TrainConfig.preset("tensorflow")
    assert (tf.framework, tf.optimizer, tf.learning_rate, tf.batch_size) == ("tensorflow", "adam", 1e-4, 50)
    torch = TrainConfig.preset("torch")
    assert (torch.optimizer, torch.learning_rate, torch.batch_size, torch.epochs) == ("sgd", 0.05, 10, 20)
    theano = TrainConfig.preset("theano")
    assert (theano.batch_size, theano.learning_rate, theano.early_stopping_patience) == (500, 0.1, 10)
    cifar = TrainConfig.preset("caffe", "cifar10")
    assert (cifar.learning_rate, cifar.weight_decay, cifar.batch_size) == (0.001, 0.004, 100)
    for name, dataset in PRESETS:
        TrainConfig.preset(name, dataset).validate()


def test_preset_overrides_transfer_defaults_between_frameworks():
    config = TrainConfig.preset("caffe", framework="tensorflow", epochs=2)
    assert (config.framework, config.epochs, config.learning_rate) == ("tensorflow", 2, 0.01)


def test_unknown_preset_and_dataset():
    with pytest.raises(ParameterError, match=r"The 'preset' parameter must be one of \{'caffe', 'tensorflow', 'theano', 'torch'\}. Got 'keras' instead."):
        TrainConfig.preset("keras")
    with pytest.raises(ParameterError, match="The 'dataset' parameter must be one of"):
        TrainConfig.preset("caffe", "imagenet")
    assert available_presets("cifar10") == ["caffe", "tensorflow", "torch"]
