"""``mirrorlab.keras``: a small Keras-like layer (Sequential, Dense, losses, SGD/Adam, metrics, fit,
BackupAndRestore) for real multi-worker training with explicit backward passes, on NumPy (CuPy on GPUs)."""


from . import activations, backend, callbacks, datasets, initializers, layers, losses, metrics, ops, optimizers, random, regularizers, saving, utils
from ...distribute.variables import Variable
from .layers import Input
from .models import Model
from .sequential import Sequential


__all__ = ["Input", "Model", "Variable", "Sequential", "activations", "backend", "callbacks", "datasets", "initializers", "layers", "losses", "metrics", "ops",
           "optimizers", "random", "regularizers", "saving", "utils"]
