"""The registry's facts about frameworks: which are retired, which are chosen by default."""

from __future__ import annotations

from dltune.backends._registry import BACKENDS, default_framework_names, framework_label, is_retired


def test_retired_frameworks_are_labelled_and_never_a_default():
    assert [n for n in BACKENDS if is_retired(n)] == ["mxnet", "theano"]
    assert framework_label("theano") == "theano (retired)"
    assert framework_label("torch") == "torch"
    assert framework_label("caffe") == "caffe"  # a name from another dltune's records
    assert not any(is_retired(n) for n in default_framework_names())
    assert set(default_framework_names()) <= {"torch", "tensorflow"}
