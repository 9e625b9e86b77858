"""dltune's trainer against a plain hand-written training loop in the same framework.

Same model (the same architecture and the same initial weights), same data, same batches in
the same order, same optimizer settings; both run in the same process, in the backend's own
interpreter with the worker's thread environment, alternating (dltune, plain, plain, dltune,
...) for several repeats. Only the epochs' training loops are timed, on both sides; one untimed
warm-up of each first. Prints, per backend, the median training time of each and the ratio
dltune / plain (target: at most 1.05), with the range of the per-repeat ratios, the ratio of
the medians of process CPU time (steadier than wall time on a busy machine; with one thread
the two agree on an idle one), and both accuracies as a sanity check.

Then, per backend, through dltune's own worker runtime: the training time of the first run in
a fresh worker over that of the later runs in it (median over ``--fresh-workers`` workers,
the backends alternated; target at most 1.03: first-use costs belong to the untimed warm-up,
reported as ``compile_time_s``), and the share of ``dltune bench --repeats N``'s wall time
spent outside the runs' training epochs (target at most 15 %).

    python benchmarks/overhead.py [--backends torch,tensorflow,mxnet,theano] [--workload digits]
        [--model lenet] [--epochs 2] [--repeats 5] [--threads 1] [--batch-size 64]
        [--first-max-grad] [--fresh-workers 5] [--bench-repeats 5]

The parent imports no framework: each backend runs in a child process of its interpreter
(``python benchmarks/overhead.py --inner NAME ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Plain loops, one per framework: what a user writes from the framework's tutorial. They share
# only the architecture builder and the initial weights with dltune's backend.


def _plain_torch(spec, config, data, params, batches_per_epoch):
    import torch
    import torch.nn.functional as F

    from dltune.backends._torch import build_module

    x_train, y_train, x_test, y_test = data
    model = build_module(spec)
    with torch.no_grad():
        layers = [m for m in model if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
        for m, (w, b) in zip(layers, zip(params[::2], params[1::2], strict=True), strict=True):
            m.weight.copy_(torch.from_numpy(w if w.ndim == 4 else w.T.copy()))
            m.bias.copy_(torch.from_numpy(b))
    opt = torch.optim.SGD(model.parameters(), lr=config["learning_rate"],
                          momentum=config["momentum"], weight_decay=config["weight_decay"])
    x, y = torch.from_numpy(x_train), torch.from_numpy(y_train)

    def train() -> tuple[float, float]:
        model.train()
        t0, c0 = time.perf_counter(), time.process_time()
        for batches in batches_per_epoch:
            for idx in batches:
                i = torch.from_numpy(idx)
                opt.zero_grad()
                loss = F.cross_entropy(model(x[i]), y[i])
                loss.backward()
                opt.step()
        return time.perf_counter() - t0, time.process_time() - c0

    def accuracy() -> float:
        model.eval()
        with torch.no_grad():
            return float((model(torch.from_numpy(x_test)).argmax(1).numpy() == y_test).mean())

    return train, accuracy


def _plain_tensorflow(spec, config, data, params, batches_per_epoch):
    import keras
    import tensorflow as tf

    from dltune.backends._common import dense_rows_chw_to_hwc
    from dltune.backends._tensorflow import (
        _param_layers,
        build_keras_model,
        flattened_chw,
        takes_nchw,
    )

    x_train, y_train, x_test, y_test = data
    model = build_keras_model(spec)
    flat = flattened_chw(spec)
    first_dense = True
    for layer, (w, b) in zip(_param_layers(model), zip(params[::2], params[1::2], strict=True), strict=True):
        if w.ndim == 4:
            w = w.transpose(2, 3, 1, 0)
        elif first_dense:
            w, first_dense = (dense_rows_chw_to_hwc(w, flat) if flat else w), False
        layer.set_weights([w, b])
    opt = keras.optimizers.SGD(learning_rate=config["learning_rate"], momentum=config["momentum"])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x = tf.constant(x_train if takes_nchw(spec) else np.ascontiguousarray(x_train.transpose(0, 2, 3, 1)))
    y = tf.constant(y_train)
    variables = model.trainable_variables

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64)])
    def step(idx):
        xb, yb = tf.gather(x, idx), tf.gather(y, idx)
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    opt.build(variables)
    step.get_concrete_function()

    def train() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        for batches in batches_per_epoch:
            for idx in batches:
                loss = step(idx)
        loss.numpy()  # wait for the last step, as dltune's trainer does for its loss
        return time.perf_counter() - t0, time.process_time() - c0

    def accuracy() -> float:
        xt = x_test if takes_nchw(spec) else np.ascontiguousarray(x_test.transpose(0, 2, 3, 1))
        return float((np.argmax(model(xt, training=False), axis=1) == y_test).mean())

    return train, accuracy


def _plain_mxnet(spec, config, data, params, batches_per_epoch):
    import mxnet as mx
    from mxnet import autograd, gluon

    from dltune.backends._mxnet import _param_blocks, build_gluon_model

    x_train, y_train, x_test, y_test = data
    net = build_gluon_model(spec)
    net.initialize()
    for block, (w, b) in zip(_param_blocks(net), zip(params[::2], params[1::2], strict=True), strict=True):
        block.weight.set_data(mx.nd.array(w if w.ndim == 4 else w.T))
        block.bias.set_data(mx.nd.array(b))
    net.hybridize(static_alloc=True, static_shape=True)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {
        "learning_rate": config["learning_rate"], "momentum": config["momentum"],
        "wd": config["weight_decay"]})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = mx.nd.array(x_train), mx.nd.array(y_train)

    def train() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        for batches in batches_per_epoch:
            for idx in batches:
                i = mx.nd.array(idx, dtype="int64")
                xb, yb = x.take(i), y.take(i)
                with autograd.record():
                    loss = loss_fn(net(xb), yb)
                loss.backward()
                trainer.step(len(idx))
        mx.nd.waitall()
        return time.perf_counter() - t0, time.process_time() - c0

    def accuracy() -> float:
        pred = net(mx.nd.array(x_test)).argmax(axis=1).asnumpy().astype(np.int64)
        return float((pred == y_test).mean())

    return train, accuracy


def _plain_theano(spec, config, data, params, batches_per_epoch, first_max_grad=False):
    import theano
    import theano.tensor as T
    from theano.tensor.nnet import conv2d
    from theano.tensor.signal.pool import pool_2d

    from dltune.models._spec import AvgPool2D, Conv2D, Dense, Flatten, MaxPool2D

    x_train, y_train, x_test, y_test = data
    weights = [theano.shared(p.astype("float32")) for p in params]
    activations = {"relu": T.nnet.relu, "tanh": T.tanh, "sigmoid": T.nnet.sigmoid}

    def net(h):
        k = 0
        for layer, shape in zip(spec.layers, spec.shapes()[:-1], strict=True):
            if isinstance(layer, MaxPool2D) and first_max_grad:
                from dltune.backends._theano import _max_pool

                h = _max_pool(h, layer, shape)  # dltune's gradient: to the first maximum only
            elif isinstance(layer, Conv2D):
                border = "half" if layer.padding == "same" else "valid"
                h = conv2d(h, weights[k], border_mode=border, subsample=(layer.stride,) * 2,
                           filter_flip=False) + weights[k + 1].dimshuffle("x", 0, "x", "x")
                k += 2
            elif isinstance(layer, (MaxPool2D, AvgPool2D)):
                mode = "max" if isinstance(layer, MaxPool2D) else "average_exc_pad"
                h = pool_2d(h, ws=(layer.size,) * 2, stride=(layer.stride,) * 2,
                            ignore_border=True, mode=mode)
            elif isinstance(layer, Flatten):
                h = h.flatten(2)
            elif isinstance(layer, Dense):
                h = T.dot(h, weights[k]) + weights[k + 1]
                k += 2
            elif getattr(layer, "function", None) in activations:
                h = activations[layer.function](h)
            # Dropout: the benchmark's models have none.
        return h

    X, Y, idx = T.tensor4("x"), T.lvector("y"), T.lvector("idx")
    logits = net(X)
    loss = T.nnet.categorical_crossentropy(T.nnet.softmax(logits), Y).mean()
    lr, mu = np.float32(config["learning_rate"]), np.float32(config["momentum"])
    updates = []
    for w, g in zip(weights, T.grad(loss, weights), strict=True):
        velocity = theano.shared(np.zeros_like(w.get_value()))
        v = mu * velocity + g
        updates += [(velocity, v), (w, w - lr * v)]
    xs, ys = theano.shared(x_train), theano.shared(y_train)
    step = theano.function([idx], loss, updates=updates, givens={X: xs[idx], Y: ys[idx]})
    predict = theano.function([X], T.argmax(logits, axis=1))

    def train() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        for batches in batches_per_epoch:
            for i in batches:
                step(i)
        return time.perf_counter() - t0, time.process_time() - c0

    def accuracy() -> float:
        return float((predict(x_test) == y_test).mean())

    return train, accuracy


def _plain_jax(spec, config, data, params, batches_per_epoch):
    import jax
    import jax.numpy as jnp
    import optax

    from dltune.backends._jax import forward

    x_train, y_train, x_test, y_test = data
    tx = optax.chain(optax.add_decayed_weights(config["weight_decay"]),
                     optax.sgd(config["learning_rate"], momentum=config["momentum"]))
    x, y = jnp.asarray(x_train), jnp.asarray(y_train.astype(np.int32))

    @jax.jit
    def step(weights, opt_state, x, y, idx):
        def loss_fn(w):
            logits = forward(spec, w, [], x[idx])[0]
            return optax.softmax_cross_entropy_with_integer_labels(logits, y[idx]).mean()

        loss, grads = jax.value_and_grad(loss_fn)(weights)
        updates, opt_state = tx.update(grads, opt_state, weights)
        return optax.apply_updates(weights, updates), opt_state, loss

    weights = [jnp.asarray(p) for p in params]
    opt_state = tx.init(weights)
    for size in {len(idx) for batches in batches_per_epoch for idx in batches}:
        step(weights, opt_state, x, y, np.zeros(size, np.int32))  # compiled before timing

    def train() -> tuple[float, float]:
        nonlocal weights, opt_state
        t0, c0 = time.perf_counter(), time.process_time()
        for batches in batches_per_epoch:
            for idx in batches:
                weights, opt_state, loss = step(weights, opt_state, x, y, idx.astype(np.int32))
        loss.block_until_ready()
        return time.perf_counter() - t0, time.process_time() - c0

    def accuracy() -> float:
        logits = jax.jit(lambda w, xt: forward(spec, w, [], xt)[0])(weights, jnp.asarray(x_test))
        return float((np.asarray(logits).argmax(1) == y_test).mean())

    return train, accuracy


PLAIN = {
    "torch": _plain_torch,
    "tensorflow": _plain_tensorflow,
    "jax": _plain_jax,
    "mxnet": _plain_mxnet,
    "theano": _plain_theano,
}


def inner(args: argparse.Namespace) -> None:
    """Child side: alternate dltune's trainer and the plain loop; print one JSON line."""
    from dltune.backends import load_trainer_class
    from dltune.backends._base import run_training
    from dltune.backends._common import batch_order
    from dltune.models._spec import ModelSpec

    spec = ModelSpec.from_dict(json.loads(args.spec))
    config = json.loads(args.config)
    data = tuple(np.load(Path(args.data) / f"{p}.npy")
                 for p in ("x_train", "y_train", "x_test", "y_test"))
    trainer_cls = load_trainer_class(args.inner)
    trainer_cls.setup(config["threads"])
    params = spec.init_params(config["seed"])
    n = len(data[1])
    batches_per_epoch = [batch_order(n, config["batch_size"], config["seed"], e)
                         for e in range(config["epochs"])]

    def dltune_run() -> tuple[float, float, float]:
        result = run_training(trainer_cls, spec, config, data)
        return result["train_time_s"], result["cpu_time_s"], result["test_accuracy"]

    def plain_run() -> tuple[float, float, float]:
        extra = {"first_max_grad": True} if args.first_max_grad else {}
        train, accuracy = PLAIN[args.inner](spec, config, data, params, batches_per_epoch, **extra)
        wall, cpu = train()
        return wall, cpu, accuracy()

    dltune_run(), plain_run()  # warm-up: first-call costs (allocators, kernels, tracing caches)
    times: dict[str, list[float]] = {"dltune": [], "plain": []}
    cpu: dict[str, list[float]] = {"dltune": [], "plain": []}
    accuracy: dict[str, float] = {}
    for r in range(args.repeats):
        order = ("dltune", "plain") if r % 2 == 0 else ("plain", "dltune")
        for who in order:
            wall, cpu_s, acc = dltune_run() if who == "dltune" else plain_run()
            times[who].append(wall)
            cpu[who].append(cpu_s)
            accuracy[who] = acc
    print(json.dumps({"times": times, "cpu": cpu, "accuracy": accuracy,
                      "version": trainer_cls.framework_version()}))


def _config(args: argparse.Namespace, name: str):
    from dltune.config import ThreadConfig, TrainConfig

    return TrainConfig(framework=name, epochs=args.epochs, batch_size=args.batch_size,
                       threads=ThreadConfig.uniform(args.threads)).validate()


def first_later(args: argparse.Namespace, names: list[str]) -> None:
    """First run / later runs in fresh workers: three runs per worker, the ratio of the first
    run's training time to the median of the two later ones; the backends alternate."""
    from dltune._bench import measure
    from dltune._workload import Workload
    from dltune.runtime import WorkerPool

    workload = Workload.from_name(args.workload, args.model)
    ratios: dict[str, list[float]] = {n: [] for n in names}
    compile_s: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for i in range(args.fresh_workers):
        for name in names if i % 2 == 0 else names[::-1]:
            with WorkerPool(max_workers=1) as pool:
                runs = [measure(workload, _config(args, name), pool=pool) for _ in range(3)]
            failed = [r for r in runs if r.status != "ok"]
            if failed:
                print(f"{name:<12}failed: {failed[0].error}")
                continue
            train = [r.metrics["train_time_s"] for r in runs]
            ratios[name].append(train[0] / statistics.median(train[1:]))
            compile_s[name].append((runs[0].metrics["compile_time_s"], runs[1].metrics["compile_time_s"]))
    print(f"\nfirst run / later runs in a fresh worker ({args.fresh_workers} workers each, "
          "alternated; target <= 1.03)")
    print(f"{'backend':<12}{'median':>8}{'min..max':>12}{'compile first s':>17}{'compile later s':>17}")
    for name in names:
        if ratios[name]:
            r = sorted(ratios[name])
            first, later = (statistics.median(c[k] for c in compile_s[name]) for k in (0, 1))
            print(f"{name:<12}{statistics.median(r):>8.3f}{f'{r[0]:.2f}..{r[-1]:.2f}':>12}"
                  f"{first:>17.3f}{later:>17.3f}")


def bench_share(args: argparse.Namespace, names: list[str]) -> None:
    """``dltune bench --repeats N`` per backend, as a user runs it: the share of its wall time
    outside the runs' training epochs (imports, data loading, workers, tracing, evaluation)."""
    import tempfile

    print(f"\ndltune bench --workload {args.workload} --model {args.model} --repeats {args.bench_repeats} "
          "(its default epochs, batch size and threads): wall time outside training (target <= 15 %)")
    print(f"{'backend':<12}{'wall s':>8}{'train s':>9}{'outside':>9}")
    for name in names:
        cmd = [sys.executable, "-m", "dltune.cli", "bench", "--workload", args.workload, "--model",
               args.model, "--frameworks", name, "--repeats", str(args.bench_repeats),
               "--storage", "none", "--json", "-q"]
        with tempfile.TemporaryDirectory() as folder:
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
            wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(f"{name:<12}failed: {proc.stderr.strip().splitlines()[-1:]}")
            continue
        metrics = json.loads(proc.stdout)[0]["metrics"]
        train = sum(r["train_time_s"] for r in metrics["repeats"])
        # A noisy cell is measured twice and the steadier kept: count the other as its like.
        rerun = bool(metrics.get("timing_rerun"))
        train *= 2 if rerun else 1
        print(f"{name:<12}{wall:>8.2f}{train:>9.2f}{1 - train / wall:>9.1%}"
              + ("   (timing rerun: training counted twice)" if rerun else ""))


def outer(args: argparse.Namespace) -> int:
    """Parent side: load the data once, run each backend's child, print the table."""
    from dltune._bench import interpreter_for, worker_extra_env
    from dltune.config import ThreadConfig, TrainConfig
    from dltune.data import load_dataset
    from dltune.models import build_model
    from dltune.runtime import worker_environment
    from dltune.runtime._arrays import export_arrays

    data = load_dataset(args.workload)
    spec = build_model(args.model, data.input_shape, data.num_classes)
    folder = export_arrays(data)
    threads = ThreadConfig.uniform(args.threads)
    print(f"workload {args.workload} ({len(data.y_train)} train), model {args.model}, "
          f"{args.epochs} epochs, batch {args.batch_size}, momentum SGD lr 0.05, "
          f"{args.threads} thread(s), {args.repeats} alternating repeats")
    print(f"{'backend':<12}{'dltune s':>10}{'plain s':>10}{'ratio':>8}{'min..max':>12}"
          f"{'cpu ratio':>11}{'acc dltune':>12}{'acc plain':>11}")
    names = args.backends.split(",")
    # --repeats 0: only the fresh-worker and bench measurements below.
    for name in [n for n in names if n in PLAIN and args.repeats > 0]:
        config = TrainConfig(framework=name, epochs=args.epochs, batch_size=args.batch_size,
                             threads=threads).validate()
        env = worker_environment(threads.environment(), worker_extra_env(name))
        cmd = [interpreter_for(name), str(Path(__file__).resolve()), "--inner", name,
               "--data", str(folder), "--spec", spec.to_json(),
               "--config", json.dumps(config.to_dict()), "--repeats", str(args.repeats)]
        if args.first_max_grad and name == "theano":
            cmd.append("--first-max-grad")
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{name:<12}failed: {proc.stderr.strip().splitlines()[-1:]}")
            continue
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        d, p = out["times"]["dltune"], out["times"]["plain"]
        ratio = statistics.median(d) / statistics.median(p)
        pairs = sorted(a / b for a, b in zip(d, p, strict=True))
        cpu_ratio = statistics.median(out["cpu"]["dltune"]) / statistics.median(out["cpu"]["plain"])
        print(f"{name:<12}{statistics.median(d):>10.3f}{statistics.median(p):>10.3f}"
              f"{ratio:>8.3f}{f'{pairs[0]:.2f}..{pairs[-1]:.2f}':>12}{cpu_ratio:>11.3f}"
              f"{out['accuracy']['dltune']:>12.3f}{out['accuracy']['plain']:>11.3f}"
              f"   ({out['version']})")
    if args.fresh_workers:
        first_later(args, names)
    if args.bench_repeats:
        bench_share(args, names)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="torch,tensorflow")
    parser.add_argument("--workload", default="digits")
    parser.add_argument("--model", default="lenet")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--first-max-grad", action="store_true",
                        help="theano: give the plain loop dltune's first-maximum pooling gradient")
    parser.add_argument("--fresh-workers", type=int, default=5,
                        help="fresh workers per backend for first / later runs (0: skip)")
    parser.add_argument("--bench-repeats", type=int, default=5,
                        help="--repeats of the timed `dltune bench` (0: skip)")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        inner(args)
        return 0
    os.environ.setdefault("DLTUNE_CACHE", str(Path(__file__).resolve().parents[1] / ".cache" / "dltune"))
    return outer(args)


if __name__ == "__main__":
    sys.exit(main())
