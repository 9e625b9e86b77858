"""The torch backend on an NVIDIA GPU against the same machine's CPU, and what the warm-up saves.

Part 1: each workload trained with the same configuration on the CPU (all usable cores) and on
the GPU, each in a new worker process through ``dltune.benchmark``: training time, the GPU's
speed-up, accuracy on both, host and device memory. Momentum SGD at learning rate 0.005: at
0.02 this cifar_quick workload sits at the edge of divergence, where the order of float
additions (thread count, device) decides whether a run learns (a 16-thread CPU run stayed at
chance while the GPU's reached 99 %), which says nothing about either device.

Part 2: the first CUDA kernels of a process create the cuBLAS / cuDNN handles and load code.
``TorchTrainer.compile`` runs one forward and backward pass before the timed epochs so that this
lands in ``compile_time_s``, not in the first epoch. Each variant runs in a fresh process:
'warm' is the backend as shipped, 'cold' the same with ``compile`` a no-op. The table gives the
first epoch's time against the mean of the later ones.

Part 3: three steps of SGD, momentum and Adam on LeNet (12x12, dropout off) from the same
weights on the CPU and on the GPU, as shipped (full float32) and with PyTorch's default
TensorFloat-32: the largest difference in any weight tensor as a share of that tensor's largest
step, and the norm of all differences against the norm of all steps.

    python benchmarks/gpu_torch.py [--json FILE]

Needs a CUDA build of PyTorch and an NVIDIA GPU; says so and exits 2 without them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import dltune
from dltune.config import ThreadConfig, TrainConfig, usable_cores
from dltune.runtime import worker_environment

WORKLOADS = [
    ("digits", "lenet", {}, 64, 5),
    ("synthetic", "cifar_quick",
     {"n_train": 5000, "n_test": 1000, "height": 32, "width": 32, "channels": 3, "classes": 10}, 100, 3),
    ("synthetic", "mlp",
     {"n_train": 20000, "n_test": 2000, "height": 16, "width": 16, "channels": 3, "classes": 10}, 256, 3),
]

FIRST_EPOCH = r"""
import json, sys
from dltune.backends import load_trainer_class
from dltune.backends._base import Trainer, run_training
from dltune._workload import Workload

cls = load_trainer_class("torch")
cls.setup({"intra_op": 1, "inter_op": 1})
if sys.argv[1] == "cold":
    cls.compile = Trainer.compile
w = Workload.from_name("digits", "lenet")
d = w.dataset
config = dict(optimizer="momentum", learning_rate=0.05, momentum=0.9, weight_decay=0.0,
              batch_size=64, epochs=4, seed=0, device="cuda", lr_schedule="constant")
m = run_training(cls, w.model, config, (d.x_train, d.y_train, d.x_test, d.y_test))
print(json.dumps({"compile_s": m["compile_time_s"],
                  "epochs_s": [c["train_time_s"] for c in m["curves"]],
                  "accuracy": m["test_accuracy"]}))
"""


STEPS = r"""
import json, sys
import torch
from dltune.backends import load_trainer_class
from dltune.backends._base import steps_apart

cls = load_trainer_class("torch")
if sys.argv[1] == "tf32":  # PyTorch's defaults: TensorFloat-32 convolutions (and matmuls here)
    build = cls.build
    def tf32_build(self, params):
        build(self, params)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    cls.build = tf32_build
print(json.dumps({optimizer: {"largest": d["param_rel"], "norm": d["param_l2"]}
                  for optimizer, d in steps_apart(cls, ("cpu", "cuda")).items()}))
"""


def _gpu_or_exit() -> str:
    probe = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.get_device_name(0) "
         "if torch.cuda.is_available() else '')"],
        capture_output=True, text=True,
    )
    name = probe.stdout.strip()
    if probe.returncode != 0 or not name:
        print("gpu_torch: no CUDA GPU that PyTorch sees here; nothing to measure.", file=sys.stderr)
        sys.exit(2)
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    gpu = _gpu_or_exit()
    cores = usable_cores()
    print(f"GPU {gpu}; CPU runs use all {cores} usable cores")
    out: dict = {"gpu": gpu, "cores": cores, "workloads": [], "first_epoch": {}}
    print("workload | device | train s | epoch s (first, rest) | accuracy % | host MB | GPU MB | GPU speed-up")
    for dataset, model, params, batch, epochs in WORKLOADS:
        workload = dltune.Workload.from_name(dataset, model, **params)
        name = f"{dataset}-{model}" + (f"[n={params['n_train']}]" if params else "")
        base = TrainConfig(framework="torch", optimizer="momentum", learning_rate=0.005,
                           batch_size=batch, epochs=epochs, threads=ThreadConfig.uniform(cores))
        times = {}
        for device in ("cpu", "cuda"):
            [record] = dltune.benchmark(workload, base.replace(device=device), storage=None)
            m = record.metrics
            if record.status != "ok":
                print(f"{name} | {device} | failed: {record.error['message']}")
                continue
            epochs_s = [c["train_time_s"] for c in m["curves"]]
            rest = sum(epochs_s[1:]) / max(1, len(epochs_s) - 1)
            times[device] = m["train_time_s"]
            speedup = f"{times['cpu'] / times['cuda']:.1f}x" if len(times) == 2 else ""
            gpu_mb = m.get("gpu_peak_mb")
            print(f"{name} | {device} | {m['train_time_s']:.3f} | {epochs_s[0]:.3f}, {rest:.3f} | "
                  f"{100 * m['test_accuracy']:.2f} | {m['peak_rss_mb']:.0f} | "
                  f"{'-' if gpu_mb is None else f'{gpu_mb:.0f}'} | {speedup}")
            out["workloads"].append({"workload": name, "device": device, "train_time_s": m["train_time_s"],
                                     "epochs_s": epochs_s, "accuracy": m["test_accuracy"],
                                     "peak_rss_mb": m["peak_rss_mb"], "gpu_peak_mb": gpu_mb})
    print("\nfirst epoch on the GPU, fresh process each (digits-lenet, batch 64, 4 epochs)")
    print("variant | compile s | first epoch s | later epochs s (mean) | first / later")
    env = worker_environment(ThreadConfig.uniform(1).environment())
    for variant in ("warm", "cold", "warm", "cold"):
        proc = subprocess.run([sys.executable, "-c", FIRST_EPOCH, variant], env=env,
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            print(f"{variant} | failed: {proc.stderr[-500:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        first, later = r["epochs_s"][0], sum(r["epochs_s"][1:]) / (len(r["epochs_s"]) - 1)
        print(f"{variant} | {r['compile_s']:.3f} | {first:.3f} | {later:.4f} | {first / later:.1f}x")
        out["first_epoch"].setdefault(variant, []).append(r)
    print("\nCPU against GPU after three steps (LeNet 12x12): largest tensor difference / norm, "
          "as a share of the step")
    print("optimizer | full float32 (shipped) | TensorFloat-32 (PyTorch's default)")
    steps = {}
    for mode in ("float32", "tf32"):
        proc = subprocess.run([sys.executable, "-c", STEPS, mode], env=env, capture_output=True,
                              text=True, timeout=600)
        steps[mode] = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
        if steps[mode] is None:
            print(f"{mode} | failed: {proc.stderr[-500:]}")
    if all(steps.values()):
        for optimizer in steps["float32"]:
            a, b = steps["float32"][optimizer], steps["tf32"][optimizer]
            print(f"{optimizer} | {100 * a['largest']:.2f} % / {100 * a['norm']:.3f} % | "
                  f"{100 * b['largest']:.1f} % / {100 * b['norm']:.2f} %")
    out["cpu_against_gpu"] = steps
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
