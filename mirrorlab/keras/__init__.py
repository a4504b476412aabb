"""``mirrorlab.keras``: a small Keras-like layer (Sequential, Dense, losses, SGD/Adam, metrics, fit,
BackupAndRestore) for real multi-worker training with explicit backward passes, on NumPy (CuPy on GPUs)."""


from . import activations, callbacks, datasets, initializers, layers, losses, metrics, optimizers
from .models import Model, Sequential


__all__ = ["Model", "Sequential", "activations", "callbacks", "datasets", "initializers", "layers", "losses", "metrics",
           "optimizers"]
