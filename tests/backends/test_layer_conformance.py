"""The layers beyond the first seven (global average pooling, batch norm, 1-D convolution and
pooling, embedding, residual blocks, LSTM and GRU), in every backend.

For each backend one interpreter (the backend's own, as a worker's) trains each model below
from the canonical initial weights with SGD, momentum and Adam and hands back the weights, the
running statistics, the loss and the predictions; the numpy reference, computed here, must
agree. A model holds all the new layers whose input shapes fit together, so that Theano and
PyTensor compile one training function per model and optimizer.
"""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from dltune.backends import BACKENDS
from dltune.backends._base import run_steps
from dltune.backends._numpy import NumpyTrainer
from dltune.config import TrainConfig
from dltune.envs import pytensor_flags, theano_flags
from dltune.models._presets import _kinds as layer_kinds
from dltune.models._spec import (
    GRU,
    LSTM,
    Activation,
    AvgPool1D,
    BatchNorm,
    Conv1D,
    Conv2D,
    Dense,
    Embedding,
    Flatten,
    GlobalAvgPool2D,
    MaxPool1D,
    ModelSpec,
    Residual,
)

VOCAB = 40
MODELS = {
    # Maps: residual blocks (an identity shortcut around a convolution and a batch norm over
    # channels; a projected shortcut, a strided 1x1 convolution, beside a strided body; one on
    # flat features), global average pooling and a batch norm over features. No bias sits right
    # before a batch norm: its gradient is zero up to rounding, which Adam would amplify.
    "image": ModelSpec(
        "image", (2, 6, 6), 3,
        (Conv2D(3, 3, padding="same"), Activation("relu"),
         Residual((Conv2D(3, 3, padding="same"), Activation("relu"), BatchNorm())),
         Residual((Conv2D(4, 2, stride=2), Activation("tanh")), shortcut=(Conv2D(4, 1, stride=2),)),
         Activation("relu"), GlobalAvgPool2D(), BatchNorm(), Residual((Dense(4), Activation("tanh"))), Dense(3)),
    ),
    # Token ids (N, L) into an embedding (some ids repeat within a batch, some never occur),
    # then on its channels-first map: same and strided valid 1-D convolutions, a batch norm
    # over channels, overlapping max pooling, average pooling and a flatten into a dense layer.
    "tokens": ModelSpec(
        "tokens", (13,), 3,
        (Embedding(VOCAB, 3), Conv1D(4, 3, padding="same"), Activation("relu"), BatchNorm(), MaxPool1D(3, 2),
         Conv1D(5, 2, stride=2), Activation("sigmoid"), AvgPool1D(2, 1), Flatten(), Dense(3)),
    ),
    # A (features, steps) sequence into an LSTM's every step (channels first, as a map), then a
    # GRU's last step. Each recurrent layer is a scan Theano and PyTensor compile: two in all.
    "sequence": ModelSpec("sequence", (3, 4), 3, (LSTM(5, return_sequences=True), GRU(5), Dense(3))),
}
# (optimizer, weight decay, learning rate per step): momentum and Adam over three steps, so
# that their state, the bias correction and the running statistics' moving average matter.
OPTIMIZERS = [("sgd", 0.0, [0.1]), ("momentum", 0.01, [0.1, 0.05, 0.02]), ("adam", 0.01, [1e-2, 1e-2, 5e-3])]
# Theano, PyTensor and JAX spend most of a case compiling it, so they run the momentum case only: the
# layers' forward pass, gradient and running statistics are what it checks, and the optimizers'
# updates, written once for both (backends/_common.py), are checked by test_conformance.py.
COMPILED_GRAPH_OPTIMIZERS = ("momentum",)


def _optimizers(backend: str) -> list[tuple[str, float, list[float]]]:
    compiled = backend in ("theano", "pytensor", "jax")
    return [o for o in OPTIMIZERS if not compiled or o[0] in COMPILED_GRAPH_OPTIMIZERS]


N_TRAIN, N_TEST, BATCH = 48, 40, 16


def _graph_only_env(backend: str, model: str) -> dict[str, str]:
    """PyTensor runs the layers' graph (forward, gradient, running statistics: what this checks)
    as Python thunks, without compiling a C module per op and shape; test_conformance.py runs the
    C mode users get. Theano does so for the models without a 2-D convolution (its convolution is
    C only). XLA (JAX) compiles the same program without its backend optimisations, in about half
    the time."""
    if backend == "jax":
        return {"XLA_FLAGS": "--xla_backend_optimization_level=0"}
    if backend == "pytensor":
        return {"PYTENSOR_FLAGS": f"{pytensor_flags()},mode=FAST_COMPILE"}  # the last value wins
    if backend == "theano" and "conv2d" not in layer_kinds(MODELS[model].layers):
        return {"THEANO_FLAGS": f"{theano_flags()},mode=FAST_COMPILE"}
    return {}


# Runs in the backend's interpreter: every model and optimizer of the job through run_steps.
PROGRAM = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from dltune.backends import load_trainer_class
    from dltune.backends._base import run_steps
    from dltune.models._spec import ModelSpec
    job = json.load(open(sys.argv[2]))
    cls = load_trainer_class(sys.argv[1])
    cls.setup({"intra_op": 1, "inter_op": 1})
    arrays, summary = {}, {}
    for case in job["cases"]:
        spec = ModelSpec.from_dict(case["spec"])
        with np.load(case["data"]) as d:
            data = (d["x_train"], d["y_train"], d["x_test"], d["y_test"])
        batches = [np.asarray(b, dtype=np.int64) for b in case["batches"]]
        out = run_steps(cls, spec, case["config"], data, batches, np.asarray(case["lrs"], dtype=np.float32))
        key = case["key"]
        arrays.update({f"{key}/p{i}": p for i, p in enumerate(out["params"])})
        arrays.update({f"{key}/s{i}": a for i, a in enumerate(out["state"])})
        arrays[f"{key}/predictions"] = out["predictions"]
        summary[key] = {"loss": out["loss"], "param_count": out["param_count"],
                        "n_params": len(out["params"]), "n_state": len(out["state"])}
    np.savez(job["out"], **arrays)
    print(json.dumps(summary))
    """
)


def _data(spec: ModelSpec, seed: int = 0):
    rng = np.random.default_rng(seed)
    if isinstance(spec.layers[0], Embedding):  # token ids, held as floats as every input is
        x_train, x_test = (rng.integers(0, VOCAB - 5, size=(n, *spec.input_shape)).astype(np.float32)
                           for n in (N_TRAIN, N_TEST))
    else:
        x_train = rng.normal(1.0, 2.0, size=(N_TRAIN, *spec.input_shape)).astype(np.float32)
        x_test = rng.normal(1.0, 2.0, size=(N_TEST, *spec.input_shape)).astype(np.float32)
    y_train = rng.integers(0, spec.num_classes, N_TRAIN).astype(np.int64)
    y_test = rng.integers(0, spec.num_classes, N_TEST).astype(np.int64)
    return x_train, y_train, x_test, y_test


def _cases(backend: str, folder):
    order = np.random.default_rng(1).permutation(N_TRAIN)
    cases = []
    for name, spec in MODELS.items():
        data = _data(spec)
        np.savez(folder / f"{name}.npz", x_train=data[0], y_train=data[1], x_test=data[2], y_test=data[3])
        for optimizer, decay, lrs in _optimizers(backend):
            config = TrainConfig(framework=backend, optimizer=optimizer, momentum=0.9,
                                 weight_decay=decay, seed=3, batch_size=BATCH).to_dict()
            batches = [order[i * BATCH:(i + 1) * BATCH] for i in range(len(lrs))]
            cases.append({"key": f"{name}-{optimizer}", "spec": spec.to_dict(), "data": str(folder / f"{name}.npz"),
                          "config": config, "batches": [b.tolist() for b in batches], "lrs": lrs,
                          "model": name, "arrays": data})
    return cases


@pytest.fixture(scope="module", params=list(BACKENDS))
def results(request, in_backend, tmp_path_factory):
    """Every case run in backend ``request.param`` and in the numpy reference."""
    backend = request.param
    folder = tmp_path_factory.mktemp(f"layers-{backend}")
    cases = _cases(backend, folder)
    # One run of the backend's interpreter per start-up environment (see _graph_only_env).
    groups: dict[str, list] = {}
    for case in cases:
        groups.setdefault(json.dumps(_graph_only_env(backend, case["model"]), sort_keys=True), []).append(case)
    summary, got = {}, {}
    for i, (env, group) in enumerate(groups.items()):
        job = {"cases": [{k: v for k, v in c.items() if k != "arrays"} for c in group],
               "out": str(folder / f"out{i}.npz")}
        (folder / f"job{i}.json").write_text(json.dumps(job))
        summary.update(in_backend(backend, PROGRAM, str(folder / f"job{i}.json"), extra_env=json.loads(env)))
        with np.load(folder / f"out{i}.npz") as state:
            got.update({k: state[k] for k in state.files})
    out = {}
    for case in cases:
        key, spec = case["key"], MODELS[case["model"]]
        ref = run_steps(NumpyTrainer, spec, case["config"], case["arrays"],
                        [np.asarray(b) for b in case["batches"]], np.float32(case["lrs"]))
        s = summary[key]
        out[key] = {
            "spec": spec, "ref": ref, "optimizer": case["config"]["optimizer"], "loss": s["loss"],
            "param_count": s["param_count"],
            "params": [got[f"{key}/p{i}"] for i in range(s["n_params"])],
            "state": [got[f"{key}/s{i}"] for i in range(s["n_state"])],
            "predictions": got[f"{key}/predictions"],
        }
    return out


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_same_steps_as_reference(results, model):
    for key in (k for k in results if k.startswith(f"{model}-")):
        _check_case(results[key], key)


def _check_case(r: dict, key: str) -> None:
    spec, ref = r["spec"], r["ref"]
    init, init_state = spec.init_params(3), spec.init_state()
    assert r["param_count"] == spec.param_count, key
    assert [p.shape for p in r["params"]] == [tuple(s) for s in spec.param_shapes()], key
    assert r["loss"] == pytest.approx(ref["loss"], rel=1e-4), key
    # Adam divides by the gradient's running magnitude, which amplifies float32 rounding in
    # small gradients; a wrong beta, epsilon or bias correction still shows far above 1 %.
    tol = 1e-2 if r["optimizer"] == "adam" else 2e-3
    for i, (p, expected_p, p0) in enumerate(zip(r["params"], ref["params"], init, strict=True)):
        expected, got = expected_p - p0, p - p0
        scale = float(np.abs(expected).max())
        assert scale > 0, f"{key}: parameter {i} did not move in the reference"
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * scale, err_msg=f"{key}: parameter {i} ({p.shape})")
    assert [a.shape for a in r["state"]] == [tuple(s) for s in spec.state_shapes()]
    for i, (a, expected_a, a0) in enumerate(zip(r["state"], ref["state"], init_state, strict=True)):
        moved = expected_a - a0
        assert np.abs(moved).max() > 0, f"{key}: running statistic {i} did not move in the reference"
        np.testing.assert_allclose(a - a0, moved, rtol=1e-3, atol=1e-3 * float(np.abs(moved).max()),
                                   err_msg=f"{key}: running statistic {i}")
    # Inference mode (running statistics) with the trained weights: the labels agree.
    assert r["predictions"].shape == (N_TEST,), key
    assert np.mean(r["predictions"] == ref["predictions"]) >= 0.95, key


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_reference_gradients_match_finite_differences(name, train):
    """The numpy reference's backward pass, in float64, against central differences at a few
    entries of every parameter (training mode: batch statistics; evaluation: running ones)."""
    from dltune.backends._numpy import loss_and_grads

    spec = MODELS[name]
    x, y = (a[:6] for a in _data(spec)[:2])
    rng = np.random.default_rng(2)
    # Off the initial values, so that batch-norm scales and shifts are not all one and zero.
    params = [p.astype(np.float64) + 0.1 * rng.normal(size=p.shape) for p in spec.init_params(0)]
    state = [a.astype(np.float64) + 0.2 for a in spec.init_state()]

    def loss(ps):
        return loss_and_grads(spec, ps, x.astype(np.float64), y, np.random.default_rng(0) if train else None,
                              [a.copy() for a in state])

    _, grads = loss(params)
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        for j in {tuple(int(rng.integers(0, n)) for n in p.shape) for _ in range(3)}:
            up, down = [q.copy() for q in params], [q.copy() for q in params]
            up[i][j] += 1e-6
            down[i][j] -= 1e-6
            numeric = (loss(up)[0] - loss(down)[0]) / 2e-6
            assert g[j] == pytest.approx(numeric, rel=1e-4, abs=1e-8), f"parameter {i} at {j}"
