"""PyTorch backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dltune.backends._base import Trainer
from dltune.backends._common import epoch_batch_sizes
from dltune.models._spec import (
    BATCH_NORM_EPSILON,
    BATCH_NORM_MOMENTUM,
    GRU,
    LSTM,
    Activation,
    AvgPool1D,
    AvgPool2D,
    BatchNorm,
    Conv1D,
    Conv2D,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    GlobalAvgPool2D,
    MaxPool1D,
    MaxPool2D,
    ModelSpec,
    Residual,
    sequence_shapes,
)

__all__ = ["TorchTrainer", "TRAINER", "build_module"]

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}


class _GlobalAvgPool2d(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3))


class _Embedding(nn.Embedding):
    """Token ids held as floats to a channels-first (N, dim, L) map."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.long()).transpose(1, 2)


class _Residual(nn.Module):
    def __init__(self, body: nn.Sequential, shortcut: nn.Sequential) -> None:
        super().__init__()
        self.body, self.shortcut = body, shortcut  # registered in this order: the canonical one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + self.shortcut(x)


class _BatchNorm(nn.Module):
    """dltune's batch norm (models/_layers.py): ``nn.BatchNorm`` moves the running variance by
    the batch's unbiased variance, dltune by the biased one that normalises the batch."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                training=False, eps=BATCH_NORM_EPSILON)
        with torch.no_grad():
            var, mean = torch.var_mean(x, dim=[0, *range(2, x.dim())], correction=0)
            self.running_mean.lerp_(mean, BATCH_NORM_MOMENTUM)
            self.running_var.lerp_(var, BATCH_NORM_MOMENTUM)
        return F.batch_norm(x, None, None, self.weight, self.bias, training=True, eps=BATCH_NORM_EPSILON)


class _Recurrent(nn.Module):
    """dltune's LSTM or GRU (models/_recurrent.py: PyTorch's gate order and reset placement)
    on a channels-first (N, F, T) map."""

    def __init__(self, layer: LSTM | GRU, features: int) -> None:
        super().__init__()
        self.rnn = (nn.LSTM if isinstance(layer, LSTM) else nn.GRU)(features, layer.units, batch_first=True)
        self.return_sequences = layer.return_sequences
        if isinstance(layer, LSTM):
            # dltune's LSTM has one bias: PyTorch's second only adds to it, so it stays zero.
            self.rnn.bias_hh_l0.requires_grad_(False)
            with torch.no_grad():
                self.rnn.bias_hh_l0.zero_()

    def parameters_in_order(self) -> list[nn.Parameter]:
        """The trained parameters in the canonical order (the kernels transposed: (out, in))."""
        rnn = self.rnn
        return [p for p in (rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0) if p.requires_grad]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x.transpose(1, 2))
        return out.transpose(1, 2) if self.return_sequences else out[:, -1]


def build_module(spec: ModelSpec) -> nn.Sequential:
    """The spec as an ``nn.Sequential`` (NCHW / NCL, so the canonical flatten order is native)."""
    return _sequence(spec.layers, tuple(spec.input_shape))


def _sequence(layers: tuple, input_shape: tuple[int, ...]) -> nn.Sequential:
    modules: list[nn.Module] = []
    for layer, shape in zip(layers, sequence_shapes(layers, input_shape)[:-1], strict=True):
        if isinstance(layer, Residual):
            modules.append(_Residual(_sequence(layer.body, shape), _sequence(layer.shortcut, shape)))
        elif isinstance(layer, Conv2D):
            modules.append(
                nn.Conv2d(shape[0], layer.filters, layer.kernel, layer.stride, padding=layer.padding)
            )
        elif isinstance(layer, MaxPool2D):
            modules.append(nn.MaxPool2d(layer.size, layer.stride))
        elif isinstance(layer, AvgPool2D):
            modules.append(nn.AvgPool2d(layer.size, layer.stride))
        elif isinstance(layer, Conv1D):
            modules.append(
                nn.Conv1d(shape[0], layer.filters, layer.kernel, layer.stride, padding=layer.padding)
            )
        elif isinstance(layer, MaxPool1D):
            modules.append(nn.MaxPool1d(layer.size, layer.stride))
        elif isinstance(layer, AvgPool1D):
            modules.append(nn.AvgPool1d(layer.size, layer.stride))
        elif isinstance(layer, Embedding):
            modules.append(_Embedding(layer.vocab_size, layer.dim))
        elif isinstance(layer, (LSTM, GRU)):
            modules.append(_Recurrent(layer, shape[0]))
        elif isinstance(layer, GlobalAvgPool2D):
            modules.append(_GlobalAvgPool2d())
        elif isinstance(layer, BatchNorm):
            modules.append(_BatchNorm(shape[0]))
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


def _parameters(module: nn.Sequential) -> list[tuple[nn.Parameter, bool]]:
    """The trainable parameters in the canonical order (each layer's weight, then its bias),
    each with whether it is a ``Linear`` or recurrent weight: (out, in), the canonical one transposed."""
    result: list[tuple[nn.Parameter, bool]] = []
    for m in module.modules():
        if isinstance(m, _Recurrent):
            result += [(p, p.dim() == 2) for p in m.parameters_in_order()]
        elif isinstance(m, (nn.Conv2d, nn.Conv1d, nn.Linear, _BatchNorm, _Embedding)):
            result += [(p, isinstance(m, nn.Linear) and p is m.weight)
                       for p in (m.weight, getattr(m, "bias", None)) if p is not None]
    return result


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
            for (p, linear), value in zip(_parameters(self.model), params, strict=True):
                p.copy_(torch.from_numpy(value.T.copy() if linear else value))
        self.model.to(self.device)
        cfg = self.config
        decay = float(cfg.get("weight_decay", 0.0))
        lr = float(cfg["learning_rate"])
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        if cfg["optimizer"] == "adam":
            self.optimizer = torch.optim.Adam(
                trainable, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=decay
            )
        else:
            momentum = float(cfg.get("momentum", 0.0)) if cfg["optimizer"] == "momentum" else 0.0
            self.optimizer = torch.optim.SGD(
                trainable, lr=lr, momentum=momentum, weight_decay=decay
            )

    def load_data(self, x_train, y_train, x_test, y_test) -> None:
        self.x_train = torch.from_numpy(np.ascontiguousarray(x_train)).to(self.device)
        self.y_train = torch.from_numpy(np.ascontiguousarray(y_train)).to(self.device)
        self.x_test = torch.from_numpy(np.ascontiguousarray(x_test)).to(self.device)

    def compile(self) -> None:
        """One forward and backward pass per batch size of the epochs, outside the timed epochs.

        The first CUDA kernels of a process create the cuBLAS / cuDNN handles and load code,
        and oneDNN creates its kernels per shape on first use: that would otherwise land in the
        first epoch's time. The passes run in eval mode (no dropout draws) and their gradients
        are dropped before any optimiser step, so the weights, the optimiser state and the
        random streams are those an unwarmed run would start with.
        """
        self.model.eval()
        for n in epoch_batch_sizes(len(self.y_train), int(self.config["batch_size"])):
            F.cross_entropy(self.model(self.x_train[:n]), self.y_train[:n]).backward()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.inference_mode():
            self.model(self.x_test[:1024])
        if self.device.type == "cuda":
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
        for p, linear in _parameters(self.model):
            # Copies: on the CPU .numpy() shares memory with the live weights.
            w = p.detach().cpu().numpy()
            result.append(w.T.copy() if linear else w.copy())
        return result

    def get_state(self) -> list[np.ndarray]:
        return [buffer.detach().cpu().numpy().copy() for m in self.model.modules() if isinstance(m, _BatchNorm)
                for buffer in (m.running_mean, m.running_var)]

    def count_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def device_peak_memory_mb(self) -> float | None:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) / 2**20
        return None


TRAINER = TorchTrainer
