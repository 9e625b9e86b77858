"""PyTorch backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dltune.backends._base import Trainer
from dltune.models._spec import (
    Activation,
    AvgPool2D,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    MaxPool2D,
    ModelSpec,
)

__all__ = ["TorchTrainer", "TRAINER", "build_module"]

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}


def build_module(spec: ModelSpec) -> nn.Sequential:
    """The spec as an ``nn.Sequential`` (NCHW, so the canonical flatten order is native)."""
    shapes = spec.shapes()
    modules: list[nn.Module] = []
    for layer, shape in zip(spec.layers, shapes[:-1], strict=True):
        if isinstance(layer, Conv2D):
            modules.append(
                nn.Conv2d(shape[0], layer.filters, layer.kernel, layer.stride, padding=layer.padding)
            )
        elif isinstance(layer, MaxPool2D):
            modules.append(nn.MaxPool2d(layer.size, layer.stride))
        elif isinstance(layer, AvgPool2D):
            modules.append(nn.AvgPool2d(layer.size, layer.stride))
        elif isinstance(layer, Flatten):
            modules.append(nn.Flatten())
        elif isinstance(layer, Dense):
            modules.append(nn.Linear(shape[0], layer.units))
        elif isinstance(layer, Activation):
            modules.append(_ACTIVATIONS[layer.function]())
        elif isinstance(layer, Dropout):
            modules.append(nn.Dropout(layer.rate))
        else:
            raise TypeError(f"torch backend cannot build layer {layer.kind!r}")
    return nn.Sequential(*modules)


def _param_modules(module: nn.Sequential) -> list[nn.Module]:
    return [m for m in module if isinstance(m, (nn.Conv2d, nn.Linear))]


class TorchTrainer(Trainer):
    name = "torch"
    SUPPORTS_GPU = True

    @classmethod
    def setup(cls, threads: dict[str, Any]) -> None:
        if threads.get("intra_op"):
            torch.set_num_threads(int(threads["intra_op"]))
        if threads.get("inter_op"):
            torch.set_num_interop_threads(int(threads["inter_op"]))

    @classmethod
    def framework_version(cls) -> str:
        return torch.__version__

    @classmethod
    def thread_info(cls) -> dict[str, Any]:
        return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}

    def build(self, params: list[np.ndarray]) -> None:
        torch.manual_seed(int(self.config["seed"]))
        self.device = torch.device("cuda" if self.config.get("device") == "cuda" else "cpu")
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise ValueError(
                    f"The torch backend was given device='cuda', but this PyTorch "
                    f"({torch.__version__}) sees no CUDA GPU; use device='cpu', or a CUDA build "
                    "of PyTorch on a machine with an NVIDIA GPU."
                )
            # Full float32, as on the CPU and in every other backend: TensorFloat-32 (on by
            # default for convolutions on Ampere and later) rounds inputs to a 10-bit mantissa.
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        self.model = build_module(self.spec)
        with torch.no_grad():
            tensors = iter(params)
            for module in _param_modules(self.model):
                w, b = next(tensors), next(tensors)
                module.weight.copy_(torch.from_numpy(w if w.ndim == 4 else w.T.copy()))
                module.bias.copy_(torch.from_numpy(b))
        self.model.to(self.device)
        cfg = self.config
        decay = float(cfg.get("weight_decay", 0.0))
        lr = float(cfg["learning_rate"])
        if cfg["optimizer"] == "adam":
            self.optimizer = torch.optim.Adam(
                self.model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=decay
            )
        else:
            momentum = float(cfg.get("momentum", 0.0)) if cfg["optimizer"] == "momentum" else 0.0
            self.optimizer = torch.optim.SGD(
                self.model.parameters(), lr=lr, momentum=momentum, weight_decay=decay
            )

    def load_data(self, x_train, y_train, x_test, y_test) -> None:
        self.x_train = torch.from_numpy(np.ascontiguousarray(x_train)).to(self.device)
        self.y_train = torch.from_numpy(np.ascontiguousarray(y_train)).to(self.device)
        self.x_test = torch.from_numpy(np.ascontiguousarray(x_test)).to(self.device)

    def compile(self) -> None:
        """On a GPU, one forward and backward pass outside the timed epochs.

        The first CUDA kernels of a process create the cuBLAS / cuDNN handles and load code,
        which would otherwise land in the first epoch's time. The pass runs in eval mode (no
        dropout draws) and its gradients are dropped before any optimiser step, so the weights,
        the optimiser state and the random streams are those an unwarmed run would start with.
        """
        if self.device.type != "cuda":
            return
        n = min(len(self.y_train), int(self.config["batch_size"]))
        self.model.eval()
        F.cross_entropy(self.model(self.x_train[:n]), self.y_train[:n]).backward()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.inference_mode():
            self.model(self.x_test[:1024])
        torch.cuda.synchronize(self.device)

    def train_epoch(self, batches: list[np.ndarray], lrs: np.ndarray) -> float:
        model, opt = self.model, self.optimizer
        model.train()
        order = torch.from_numpy(np.concatenate(batches)).to(self.device)
        sizes = [len(b) for b in batches]
        losses: list[torch.Tensor] = []
        current_lr = None
        for idx, lr in zip(torch.split(order, sizes), lrs.tolist(), strict=True):
            if lr != current_lr:
                for group in opt.param_groups:
                    group["lr"] = lr
                current_lr = lr
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(self.x_train[idx]), self.y_train[idx])
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        # One reduction per epoch instead of two small ops per step.
        weights = torch.tensor(sizes, dtype=losses[0].dtype, device=self.device)
        return float((torch.stack(losses) * weights).sum().item()) / len(order)

    def predict(self) -> np.ndarray:
        self.model.eval()
        with torch.inference_mode():
            out = [self.model(chunk).argmax(1) for chunk in torch.split(self.x_test, 1024)]
        return torch.cat(out).cpu().numpy()

    def get_params(self) -> list[np.ndarray]:
        result = []
        for module in _param_modules(self.model):
            # Copies: on the CPU .numpy() shares memory with the live weights.
            w = module.weight.detach().cpu().numpy()
            result += [w.copy() if w.ndim == 4 else w.T.copy(), module.bias.detach().cpu().numpy().copy()]
        return result

    def count_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def device_peak_memory_mb(self) -> float | None:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) / 2**20
        return None


TRAINER = TorchTrainer
