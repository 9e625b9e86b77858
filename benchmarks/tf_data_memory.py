"""How much memory does TensorFlow's copy of the data set cost, as it is and as it was?

    python benchmarks/tf_data_memory.py [--model cifar_quick] [--sizes 10000x3 50000x3 50000x1]
                                        [--batches 100]

Each case runs in a new process, as a worker does: the data set (random, n x C x 32 x 32
float32 training samples and n/5 test samples) read from .npy files, the model built, the data
loaded, compiled, ``--batches`` batches of 64 trained and the test set predicted.
Side by side:

- *as it is*: the worker reads the files into 64-byte aligned arrays
  (``dltune.backends._common.load_npy``) and the TensorFlow trainer shares them
  (``host_tensor``: DLPack): as they are for a model that flattens first (it takes NCHW) or
  one channel, else through one NHWC copy made once;
- *as it was* (before 2026-12-05): ``np.load``, then ``tf.constant`` of a contiguous NHWC copy
  (the old ``load_data``, copied below).

Printed per case: the peak RSS (VmHWM) over the process before the data were read, and as a
multiple of the data set's size. Then the training step itself, which should not have changed:
per model, one process holds both trainers (4,000 samples of 3x32x32, 2 threads) and times
their epochs alternately, 8 each (``--no-timing`` to skip). Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _vm(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(mode: str, folder: str, batches: int, model: str) -> None:
    import numpy as np

    from dltune.backends import _tensorflow as T
    from dltune.backends._common import batch_order, load_npy
    from dltune.models._presets import build_model

    tf = T.tf
    T.TRAINER.setup({"intra_op": 2, "inter_op": 2})
    tf.constant(np.zeros(3, np.float32))  # the framework's own start-up, before the baseline
    before = _vm("VmRSS")
    read = load_npy if mode == "as it is" else (lambda p: np.ascontiguousarray(np.load(p)))
    x, y, xt, yt = (read(os.path.join(folder, f"{p}.npy")) for p in ("x_train", "y_train", "x_test", "y_test"))
    if mode != "as it is":
        T.takes_nchw = lambda spec: False  # the model as it was: NHWC inputs only
    trainer = T.TRAINER(build_model(model, x.shape[1:], 10),
                        {"seed": 0, "batch_size": 64, "learning_rate": 0.01, "optimizer": "sgd", "epochs": 1})
    trainer.build(trainer.spec.init_params(0))
    if mode == "as it is":
        trainer.load_data(x, y, xt, yt)
    else:  # the load_data of before 2026-12-05
        with tf.device(trainer.device):
            trainer.x_train = tf.constant(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
            trainer.y_train = tf.constant(y.astype(np.int64))
            trainer.x_test = tf.constant(np.ascontiguousarray(xt.transpose(0, 2, 3, 1)))
    trainer.compile()
    order = batch_order(len(y), 64, 0, 0)[:batches]
    trainer.train_epoch(order, np.full(len(order), 0.01, np.float32))
    trainer.predict()
    print(json.dumps({"peak_over_start_mb": _vm("VmHWM") - before, "data_mb": (x.nbytes + xt.nbytes) / 2**20}))


def timing(model: str, batch_size: int = 32) -> dict[str, float]:
    """Median epoch time of the trainer as it is and as it was, alternating in one process."""
    import numpy as np

    from dltune.backends import _tensorflow as T
    from dltune.backends._common import aligned_empty, batch_order
    from dltune.models._presets import build_model

    tf = T.tf
    T.TRAINER.setup({"intra_op": 2, "inter_op": 2})
    n, rng = 4000, np.random.default_rng(0)
    x = aligned_empty((n, 3, 32, 32), np.float32)
    x[...] = rng.standard_normal(x.shape, dtype=np.float32)
    y = rng.integers(0, 10, n)
    config = {"seed": 0, "batch_size": batch_size, "learning_rate": 0.01, "optimizer": "sgd", "epochs": 1}
    trainers = {}
    for mode in ("as it is", "as it was"):
        saved = T.takes_nchw
        if mode == "as it was":
            T.takes_nchw = lambda spec: False
        try:
            trainer = T.TRAINER(build_model(model, (3, 32, 32), 10), config)
            trainer.build(trainer.spec.init_params(0))
            trainer.load_data(x, y, x[:500], y[:500])
            if mode == "as it was":
                trainer.x_train = tf.constant(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
            trainer.compile()
        finally:
            T.takes_nchw = saved
        trainers[mode] = trainer
    order = batch_order(n, batch_size, 0, 0)
    lrs = np.full(len(order), 0.01, np.float32)
    times: dict[str, list[float]] = {mode: [] for mode in trainers}
    for trainer in trainers.values():
        trainer.train_epoch(order, lrs)  # warm-up
    for i in range(8):
        for mode in (("as it is", "as it was") if i % 2 else ("as it was", "as it is")):
            t0 = time.perf_counter()
            trainers[mode].train_epoch(order, lrs)
            times[mode].append(time.perf_counter() - t0)
    return {mode: statistics.median(v) for mode, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["10000x3", "50000x3", "50000x1"],
                        help="training samples x channels per case")
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--model", default="cifar_quick", help="mlp, lenet or cifar_quick")
    parser.add_argument("--no-timing", action="store_true", help="skip the training step's timing")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--time-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.batches, args.model)
        return
    if args.time_child:
        print(json.dumps(timing(args.time_child)))
        return
    import numpy as np

    print(f"model {args.model}")
    print(f"{'case':>16}  {'mode':>10}  {'data MB':>8}  {'peak over start MB':>18}  {'x data':>6}")
    for size in args.sizes:
        n, c = (int(v) for v in size.split("x"))
        with tempfile.TemporaryDirectory() as folder:
            rng = np.random.default_rng(0)
            for part, shape in (("x_train", (n, c, 32, 32)), ("x_test", (n // 5, c, 32, 32))):
                np.save(os.path.join(folder, f"{part}.npy"), rng.standard_normal(shape, dtype=np.float32))
            for part, m in (("y_train", n), ("y_test", n // 5)):
                np.save(os.path.join(folder, f"{part}.npy"), rng.integers(0, 10, m))
            for mode in ("as it is", "as it was"):
                out = subprocess.run([sys.executable, __file__, "--batches", str(args.batches), "--model", args.model,
                                      "--child", mode, folder],
                                     capture_output=True, text=True, check=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                print(f"{n:>7} x {c}x32x32  {mode:>10}  {r['data_mb']:8.0f}  {r['peak_over_start_mb']:18.0f}  "
                      f"{r['peak_over_start_mb'] / r['data_mb']:6.2f}")
    if args.no_timing:
        return
    print("epoch of 4,000 x 3x32x32, batch 32, 2 threads: median of 8, alternating in one process")
    for model in ("mlp", "lenet", "cifar_quick"):
        out = subprocess.run([sys.executable, __file__, "--time-child", model],
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{model:>12}: as it is {r['as it is']:.3f} s, as it was {r['as it was']:.3f} s "
              f"(ratio {r['as it is'] / r['as it was']:.3f})")


if __name__ == "__main__":
    main()
