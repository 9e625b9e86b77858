"""``dltune bench --preset``: the published settings for the data's kind (its channels)."""

from __future__ import annotations

import json

import pytest

_DATA = ("n_train=60", "n_test=30", "height=8", "width=8", "classes=3")


@pytest.mark.parametrize("channels, batch, lr", [(1, 64, 0.01), (3, 100, 0.001)])
def test_a_preset_is_the_published_one_for_the_data_s_channels(cli, channels, batch, lr):
    data = [item for p in (*_DATA, f"channels={channels}") for item in ("--data", p)]
    done = cli("bench", "--workload", "synthetic", "--model", "mlp", *data, "--frameworks", "numpy",
               "--preset", "caffe", "--epochs", "1", "--storage", "none", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = json.loads(done.stdout)
    config = record["config"]
    # Caffe's MNIST settings on grey images, its CIFAR-10 ones on colour (a synthetic set too).
    assert (config["preset_name"], config["batch_size"], config["learning_rate"]) == ("caffe", batch, lr)
