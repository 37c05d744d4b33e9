"""The demo's model: a small NumPy MLP on scikit-learn's bundled digits, trained with SGD.

:class:`DigitsMLP` is an ordinary :class:`~orchestrator.Trainable`; one ``step`` is one
or more epochs of minibatch SGD (with momentum and L2 weight decay) and reports
``train_loss`` and ``val_accuracy``. A checkpoint is one ``.npz`` file holding the
weights, the momentum buffers and the shuffling RNG's state, so a trial restored from a
checkpoint continues exactly as it would have without the interruption.

``hidden=0`` gives softmax regression. Nothing is downloaded: the digits (1,797 8x8
images) ship with scikit-learn. :func:`load_digits_split` caches its split as an
``.npz`` in the temp directory, so once the driver has loaded it, actors on the same
machine read that file instead of each paying a second or two to import scikit-learn.
(The config stays small and plain: the experiment journal records it.)
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from orchestrator.actor.trainable import Trainable

__all__ = ["CHECKPOINT_FILE", "DEFAULTS", "DigitsMLP", "load_digits_split"]

#: The one file a checkpoint consists of.
CHECKPOINT_FILE = "model.npz"

DEFAULTS: Mapping[str, Any] = {
    "lr": 0.1,
    "hidden": 64,
    "weight_decay": 1e-4,
    "batch_size": 32,
    "momentum": 0.9,
    "epochs_per_iter": 1,
    "seed": 0,
}

Split = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
_SPLIT_NAMES = ("x_train", "y_train", "x_val", "y_val")


def load_digits_split(
    val_fraction: float = 0.2, seed: int = 0, *, cache_dir: str | None = None
) -> Split:
    """``(x_train, y_train, x_val, y_val)``: the digits scaled to [0, 1], split at random.

    Cached in ``cache_dir`` (default: the temp directory); a missing or unreadable
    cache is rebuilt from scikit-learn, and a cache that cannot be written is skipped.
    """
    try:
        version = importlib.metadata.version("scikit-learn")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    name = f"trialflow-digits-{version}-{val_fraction:g}-{seed}.npz"
    path = os.path.join(cache_dir or tempfile.gettempdir(), name)
    with contextlib.suppress(OSError, KeyError, ValueError):
        with np.load(path) as cached:
            x_train, y_train, x_val, y_val = (cached[k] for k in _SPLIT_NAMES)
            return x_train, y_train, x_val, y_val
    split = _split_digits(val_fraction, seed)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            np.savez(fh, allow_pickle=False, **dict(zip(_SPLIT_NAMES, split, strict=True)))
        os.replace(tmp, path)  # readers see the whole file or none
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(tmp)
    return split


def _split_digits(val_fraction: float, seed: int) -> Split:
    from sklearn.datasets import load_digits  # imported here: it takes a second or two

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_val = int(round(len(y) * val_fraction))
    val, train = order[:n_val], order[n_val:]
    return x[train], y[train], x[val], y[val]


class DigitsMLP(Trainable):
    """A one-hidden-layer ReLU MLP (or softmax regression with ``hidden=0``).

    Config keys (see :data:`DEFAULTS`): ``lr``, ``hidden``, ``weight_decay``,
    ``batch_size``, ``momentum``, ``epochs_per_iter``, ``seed``.
    """

    def setup(self, config: dict[str, Any]) -> None:
        unknown = set(config) - set(DEFAULTS)
        if unknown:
            raise ValueError(
                f"DigitsMLP: unknown config key(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}"
            )
        cfg = {**DEFAULTS, **config}
        self.lr = float(cfg["lr"])
        self.weight_decay = float(cfg["weight_decay"])
        self.batch_size = int(cfg["batch_size"])
        self.momentum = float(cfg["momentum"])
        self.epochs_per_iter = int(cfg["epochs_per_iter"])
        hidden = int(cfg["hidden"])
        self.x_train, self.y_train, self.x_val, self.y_val = load_digits_split()
        n_in, n_out = self.x_train.shape[1], int(self.y_train.max()) + 1
        sizes = [n_in, hidden, n_out] if hidden > 0 else [n_in, n_out]
        self.rng = np.random.default_rng(int(cfg["seed"]))
        self.params: list[np.ndarray] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            scale = np.sqrt(2.0 / fan_in)
            self.params.append(
                (self.rng.standard_normal((fan_in, fan_out)) * scale).astype(np.float32)
            )
            self.params.append(np.zeros(fan_out, dtype=np.float32))
        self.velocity = [np.zeros_like(p) for p in self.params]

    # -- the model ------------------------------------------------------------------

    def _forward(self, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Logits, and each layer's input (kept for the backward pass)."""
        inputs = []
        h = x
        n_layers = len(self.params) // 2
        for i in range(n_layers):
            inputs.append(h)
            h = h @ self.params[2 * i] + self.params[2 * i + 1]
            if i < n_layers - 1:
                h = np.maximum(h, 0.0)
        return h, inputs

    def _sgd_step(self, x: np.ndarray, y: np.ndarray) -> float:
        logits, inputs = self._forward(x)
        logits = logits - logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        probs = exp / exp.sum(axis=1, keepdims=True)
        n = len(y)
        loss = float(-np.log(probs[np.arange(n), y] + 1e-12).mean())
        grad = probs
        grad[np.arange(n), y] -= 1.0
        grad /= n
        grads: list[np.ndarray] = [np.empty(0)] * len(self.params)
        for i in reversed(range(len(self.params) // 2)):
            w = self.params[2 * i]
            grads[2 * i] = inputs[i].T @ grad + self.weight_decay * w
            grads[2 * i + 1] = grad.sum(axis=0)
            if i > 0:
                grad = (grad @ w.T) * (inputs[i] > 0)
        for p, v, g in zip(self.params, self.velocity, grads, strict=True):
            v *= self.momentum
            v -= self.lr * g
            p += v
        return loss

    def step(self) -> dict[str, Any]:
        losses = []
        n = len(self.y_train)
        for _ in range(self.epochs_per_iter):
            order = self.rng.permutation(n)
            for start in range(0, n, self.batch_size):
                batch = order[start : start + self.batch_size]
                losses.append(self._sgd_step(self.x_train[batch], self.y_train[batch]))
        logits, _ = self._forward(self.x_val)
        accuracy = float((logits.argmax(axis=1) == self.y_val).mean())
        loss = float(np.mean(losses))
        if not np.isfinite(loss):
            raise FloatingPointError(
                f"trial {self.trial_id}: training diverged (loss {loss}); lower lr (now {self.lr})"
            )
        return {"train_loss": loss, "val_accuracy": accuracy}

    # -- checkpoints ----------------------------------------------------------------

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        arrays = {f"param_{i}": p for i, p in enumerate(self.params)}
        arrays.update({f"velocity_{i}": v for i, v in enumerate(self.velocity)})
        arrays["rng"] = np.array(json.dumps(self.rng.bit_generator.state))
        np.savez(os.path.join(checkpoint_dir, CHECKPOINT_FILE), allow_pickle=False, **arrays)

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        path = os.path.join(checkpoint_dir, CHECKPOINT_FILE)
        with np.load(path) as saved:
            params = [saved[f"param_{i}"] for i in range(len(self.params))]
            velocity = [saved[f"velocity_{i}"] for i in range(len(self.velocity))]
            rng_state = json.loads(str(saved["rng"]))
        for mine, theirs in zip(self.params, params, strict=True):
            if mine.shape != theirs.shape:
                raise ValueError(
                    f"trial {self.trial_id}: checkpoint {path} holds a parameter of shape "
                    f"{theirs.shape}, the model expects {mine.shape} (different hidden size?)"
                )
        self.params, self.velocity = params, velocity
        self.rng.bit_generator.state = rng_state
