"""``Variable``: TF's ``tf.Variable`` (its conversions, operators, reads and updates); the distributed variables in
``distributed_variables.py`` build on it.

``Variable(...)`` inside a strategy's scope (or replica function) returns a distributed variable, as
``tf.Variable`` does. Values are stored as read-only arrays and every update stores a new array, so a
value read earlier never changes under the reader.
"""

from __future__ import annotations

from abc import ABC, ABCMeta, abstractmethod

import itertools
import operator
from typing import Any

import numpy as np

from .. import errors
from ..aggregation import VariableAggregation, VariableSynchronization
from .kernel_dtypes import tf_dtype
from ..frontend import current_frontend
from ..tensor import (STRING, as_tensor, canonical, device_of, dtype_name, frozen, is_cupy, is_string, like,
                      to_host)
from . import context
from .bool_operators import bool_operand, refuse_bool_unary
from .scatter import ScatterMethods, is_scatter, scatter_rows
from .scatter_nd import SCATTER_ND_KINDS, ScatterNdMethods, scatter_nd
from .values import ReplicaValues

__all__ = ["Variable", "VariableRef", "plain_variable", "validate_synchronization_aggregation_trainable"]


def validate_synchronization_aggregation_trainable(synchronization: Any, aggregation: Any, trainable: Any,
                                                   name: Any) -> tuple:
    """Coerce the enums and default ``trainable`` (False for ON_READ), with TF's error texts."""
    try:
        synchronization = VariableSynchronization(
            VariableSynchronization.AUTO if synchronization is None else synchronization)
    except ValueError:
        raise ValueError(f"Invalid variable synchronization mode: {synchronization} for variable: {name}") from None
    try:
        aggregation = VariableAggregation(VariableAggregation.NONE if aggregation is None else aggregation)
    except ValueError:
        raise ValueError(f"Invalid variable aggregation mode: {aggregation} for variable: {name}") from None
    if trainable is None:
        trainable = synchronization != VariableSynchronization.ON_READ
    return synchronization, aggregation, bool(trainable)


def _initial_array(initial_value: Any, dtype: Any, shape: Any) -> Any:
    if initial_value is None:
        raise ValueError("The `initial_value` arg to `tf.Variable` must be specified except when you are not providing "
                         "a `variable_def`. You provided neither.")
    if callable(initial_value):
        initial_value = initial_value()
    if isinstance(initial_value, Variable):
        initial_value = initial_value._read()
    value = _convert(initial_value, None if dtype is None else current_frontend().as_dtype(dtype))
    if shape is not None:
        want = tuple(shape)
        if len(want) != value.ndim or any(w is not None and w != d for w, d in zip(want, value.shape)):
            raise ValueError(f"The initial value's shape ({value.shape}) is not compatible with the explicitly "
                             f"supplied `shape` argument ({want}).")
    writable = is_cupy(value) or (isinstance(value, np.ndarray) and value.flags.writeable)
    return frozen(_own_copy(value) if writable else value)


def _own_copy(value: Any) -> Any:
    """A copy the caller cannot mutate (CuPy arrays have no read-only flag, so they are always copied)."""
    if is_cupy(value):
        with device_of(value):
            return value.copy()
    return value.copy()


_HOST = (np.ndarray, np.generic)  # NumPy values: updated without a device context


def _convert(value: Any, dtype: np.dtype | None) -> Any:
    """``value`` as an array of ``dtype``: Python numbers take the dtype, arrays must cast safely; strings convert
    only to (and from) strings, kept in TF's form (see ``tensor.canonical``)."""
    if isinstance(value, ReplicaValues):
        raise TypeError("Cannot use DistributedValues to update variables in replica context.")
    if isinstance(value, Variable):
        value = value._read()
    if dtype is None:
        return canonical(as_tensor(value))
    if dtype == STRING:
        return _as_string(value)
    if isinstance(value, np.ndarray) or is_cupy(value) or isinstance(value, np.generic):
        if value.dtype != dtype and not np.can_cast(value.dtype, dtype, "same_kind"):
            # TF's text for a tensor of another dtype (it casts NumPy values; mirrorlab's tensors are NumPy arrays,
            # so it casts within a kind and refuses what would lose the kind, e.g. floats into an integer variable).
            raise ValueError(f"Tensor conversion requested dtype {dtype_name(dtype)} for Tensor with dtype "
                             f"{dtype_name(value)}: {_numpy_text(value)}\nFix: cast it first, e.g. "
                             f"value.astype('{dtype_name(dtype)}').")
        return value.astype(dtype, copy=False)
    if is_string(np.asarray(value).dtype):
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {tf_dtype(dtype)}")
    return current_frontend().constant(value, dtype)  # Python values convert as TF converts them (TypeError for 0 into a bool, ...)


def _as_string(value: Any) -> Any:
    """``value`` as a string tensor: TF converts only strings and bytes (and lists of them) to ``tf.string``."""
    if isinstance(value, (np.ndarray, np.generic)) or is_cupy(value):
        if not is_string(value.dtype):
            raise ValueError(f"Tensor conversion requested dtype string for Tensor with dtype {dtype_name(value)}: "
                             f"{value!r}\nFix: pass str or bytes values (e.g. str(number)).")
        return canonical(value)
    array = as_tensor(value)
    if not is_string(array.dtype):
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype string")
    return array


def plain_variable(initial_value: Any, name: str) -> "Variable":
    """A single-copy, non-trainable ``Variable`` even inside a strategy's scope (bookkeeping such as a
    checkpoint's save counter)."""
    return ABCMeta.__call__(Variable, initial_value, trainable=False, name=name)


class _VariableMeta(ABCMeta):
    """``Variable(...)`` under a strategy returns that strategy's distributed variable, as in TF."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is Variable:
            strategy = context.get_strategy()
            if strategy._single_plain and not strategy._is_default:  # OneDeviceStrategy: plain, but remembered
                variable = super().__call__(*args, **kwargs)
                variable._strategy = strategy
                return variable
            if not strategy._is_default:
                return strategy.extended._create_variable(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class _ArrayLike(ABC):
    """Arithmetic, indexing and NumPy conversion through the value the current context reads."""

    __array_priority__ = 100  # NumPy operands defer to the variable's operators (TF's dtype rule)

    @abstractmethod
    def _read(self) -> Any:
        """Implemented by subclasses."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = np.asarray(to_host(self._read()))
        return value if dtype is None else value.astype(dtype)

    def numpy(self) -> Any:
        """A writable copy of the value (a NumPy scalar for a scalar variable, ``bytes`` for a scalar string, as
        TF's)."""
        value = self._read()
        array = value.get() if is_cupy(value) else np.array(value)
        if array.ndim:
            return array
        return array.item() if array.dtype.kind == "S" else array[()]

    def value(self) -> Any:
        """The value as a new tensor (on a recording tape, a trainable float variable's read is watched)."""
        return self._tensor_read()

    def read_value(self) -> Any:
        """The value as a new tensor, as ``value()``."""
        return self._tensor_read()

    def _tensor_read(self) -> Any:
        leaf = _tape_leaf(self)
        return leaf if leaf is not None else _new_tensor(self._read())

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, item: Any) -> Any:
        leaf = _tape_leaf(self)
        if leaf is not None:
            return leaf[item]
        array = self._read()
        try:
            return _tensor(array[item])  # an element is a (0-d) tensor too
        except IndexError as error:
            raise errors.InvalidArgumentError(f"{_slice_error(np.shape(array), item, error)} [Op:StridedSlice] name: "
                                              "strided_slice/") from None

    def __iter__(self) -> Any:
        """The elements along the first dimension, each a tensor (TF's TypeError for a scalar)."""
        array = self._read()
        if not np.ndim(array):
            raise TypeError("Cannot iterate over a scalar tensor.")
        return (_tensor(array[k]) for k in range(len(array)))

    def __float__(self) -> float:
        return float(self._read())

    def __int__(self) -> int:
        return int(self._read())

    def __bool__(self) -> bool:
        return bool(self._read())

    def __complex__(self) -> complex:
        return complex(self._read())

    def __neg__(self) -> Any:
        leaf = _tape_leaf(self)
        if leaf is not None:
            return -leaf
        value = self._read()
        if self.dtype == np.bool_:
            refuse_bool_unary("neg")
        return _tensor(-value)

    def __pos__(self) -> Any:
        return _tensor(+self._read())

    def __abs__(self) -> Any:
        leaf = _tape_leaf(self)
        if leaf is not None:
            return abs(leaf)
        value = self._read()
        if self.dtype == np.bool_:
            refuse_bool_unary("abs")
        return _tensor(abs(value))


def _slice_error(shape: tuple[int, ...], item: Any, error: IndexError) -> str:
    """TF's StridedSlice text for an index NumPy refused: a scalar cannot be sliced, and an integer index out of its
    dimension is named with a negative one counted from the end."""
    if not shape:
        return "Attempting to slice scalar input."
    for dimension, index in enumerate(item if isinstance(item, tuple) else (item,)):
        if isinstance(index, (int, np.integer)) and dimension < len(shape) and not -shape[dimension] <= index < \
                shape[dimension]:
            shown = index + shape[dimension] if index < 0 else index
            return f"slice index {shown} of dimension {dimension} out of bounds."
    return str(error)


def _new_tensor(array: Any) -> Any:
    """A new (read-only) array object over ``array``'s data: as in TF, each read is its own tensor, so reads
    on different replicas are never the same object (``strategy.run`` wraps them in PerReplica)."""
    return array.view() if hasattr(array, "view") else array


def _operand(var: "_ArrayLike", other: Any, name: str, reflected: bool) -> Any:
    """``other`` as TF converts the second operand of a variable's operator: to the variable's dtype
    (NumPy values and Python numbers are cast; a Python float never converts to an integer dtype; a bool variable
    has its own rules, see bool_operators)."""
    dtype = np.dtype(var.dtype)
    if dtype.kind == "b":
        other = bool_operand(name, other, reflected)
    if isinstance(other, _ArrayLike):
        return other._read()
    if dtype == STRING:
        if name != "add" or reflected:
            return _as_string(other)  # TF converts the operand to the variable's dtype
        operand = as_tensor(other)  # tf.add takes the operand as it is
        if not is_string(operand.dtype):
            raise errors.InvalidArgumentError(
                f"cannot compute Add as input #1(zero-based) was expected to be a string tensor but is a "
                f"{tf_dtype(operand)} tensor [Op:Add] name: \nFix: add str or bytes to a string variable.")
        return canonical(operand)
    if isinstance(other, float) and dtype.kind in "iub":
        fix = (f"\nFix: use a {dtype.name} operand, or cast the variable's value first, e.g. "
               f"`v.numpy().astype('float32') {_SYMBOLS[name]} {other!r}`.")
        if name == "add" and not reflected:
            raise errors.InvalidArgumentError(
                f"cannot compute AddV2 as input #1(zero-based) was expected to be a {dtype.name} tensor but is a "
                f"float tensor [Op:AddV2] name: {fix}")
        if name == "truediv" and not reflected:
            raise TypeError(f"`x` and `y` must have the same dtype, got tf.{dtype.name} != tf.float32.{fix}")
        raise TypeError(f"Cannot convert {other!r} to EagerTensor of dtype {dtype.name}{fix}")
    if is_cupy(other):
        return other.astype(dtype, copy=False)
    if isinstance(other, (int, float, list, tuple, np.ndarray, np.generic)):
        return like(np.asarray(other).astype(dtype, copy=False), var._read())
    return other


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
            "matmul": "@", "and": "&", "or": "|", "xor": "^", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
            "eq": "==", "ne": "!="}


def _install_binary_ops() -> None:
    for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor"):
        op = getattr(operator, f"{name}_" if name in ("and", "or") else name)
        setattr(_ArrayLike, f"__{name}__", lambda self, other, op=op, name=name: _forward(self, other, op, name))
        setattr(_ArrayLike, f"__r{name}__", lambda self, other, op=op, name=name: _reflected(self, other, op, name))
    for name in ("lt", "le", "gt", "ge"):
        op = getattr(operator, name)
        setattr(_ArrayLike, f"__{name}__",
                lambda self, other, op=op, name=name: _tensor(op(self._read(), _operand(self, other, name, False))))
    for name in ("eq", "ne"):
        setattr(_ArrayLike, f"__{name}__", lambda self, other, name=name: _equality(self, other, name))
    _ArrayLike.__hash__ = _unhashable  # type: ignore[method-assign]


_CREATED = itertools.count()  # serial numbers of variables
_DIFFERENTIABLE = ("add", "sub", "mul", "truediv", "pow", "matmul")


def _tape_leaf(var: "_ArrayLike", name: str = "") -> Any:
    """The tracked read of ``var`` while a tape watches it (the frontend's ``watched``), for reads and the
    differentiable operators (``name``); None otherwise."""
    leaf = current_frontend().watched(var) if not name or name in _DIFFERENTIABLE else var
    return None if leaf is var else leaf


def _forward(var: "_ArrayLike", other: Any, op: Any, name: str) -> Any:
    """``var <op> other``: through the tape's leaf for ``var`` while a tape watches it (differentiable operators)."""
    leaf = _tape_leaf(var, name)
    if leaf is not None:
        return getattr(leaf, f"__{name}__")(other if isinstance(other, _ArrayLike) else
                                            _operand(var, other, name, False))
    other_leaf = _tape_leaf(other, name) if isinstance(other, _ArrayLike) else None
    if other_leaf is not None:  # an unwatched variable with a watched one: the gradient flows to the other
        return getattr(other_leaf, f"__r{name}__")(_new_tensor(var._read()))
    return _binary(op, name, var._read(), _operand(var, other, name, False))


def _binary(op: Any, name: str, left: Any, right: Any) -> Any:
    """``op(left, right)`` as a tensor, with TF's error for integers to negative integer powers."""
    try:
        return _tensor(op(left, right))
    except ValueError as error:
        if name != "pow":
            raise
        raise errors.InvalidArgumentError(f"{error} [Op:Pow]") from None


def _reflected(var: "_ArrayLike", other: Any, op: Any, name: str) -> Any:
    """``other <op> var``: as every operator of TF's variables, it reads the variable before converting ``other``."""
    leaf = _tape_leaf(var, name)
    if leaf is not None:
        return getattr(leaf, f"__r{name}__")(_operand(var, other, name, True))
    value = var._read()
    return _binary(op, name, _operand(var, other, name, True), value)


def _tensor(result: Any) -> Any:
    """An operator's (or element's) result as a tensor: NumPy hands back 0-d results as scalars (``bytes`` for a
    string), which TF returns as 0-d tensors."""
    return canonical(result) if isinstance(result, (bytes, np.generic)) else result


def _equality(var: "_ArrayLike", other: Any, name: str) -> Any:
    """TF's element-wise ``==``/``!=`` of a variable: None cannot convert, and values of incompatible
    shapes compare unequal as a whole (a scalar)."""
    if other is None:
        raise ValueError("Attempt to convert a value (None) with an unsupported type (<class 'NoneType'>) to a "
                         "Tensor.\nFix: compare with `is None`.")
    mine, theirs = var._read(), _operand(var, other, name, False)
    try:
        np.broadcast_shapes(np.shape(mine), np.shape(theirs))
    except ValueError:
        return np.asarray(name == "ne")
    return _tensor(getattr(operator, name)(mine, theirs))


def _unhashable(self: Any) -> int:
    """TF's TypeError: variables compare element-wise, so they cannot be dict keys or set members."""
    raise TypeError(f"Variable is unhashable. Instead, use variable.ref() as the key. (Variable: {self!r})")


_install_binary_ops()


class _Assignable(_ArrayLike, ScatterMethods, ScatterNdMethods):
    """TF's update methods (assign*, scatter_*, scatter_nd_*), all through ``_update(kind, value, read_value)``."""

    @abstractmethod
    def _update(self, kind: str, value: Any, read_value: bool) -> Any:
        """Apply the update; returns what the update method returns (None if not ``read_value``)."""

    def assign(self, value: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
        """Set the value (see the class docs of distributed variables for their rules); None if not read_value."""
        return self._update("assign", value, read_value)

    def assign_add(self, delta: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
        return self._update("assign_add", delta, read_value)

    def assign_sub(self, delta: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
        return self._update("assign_sub", delta, read_value)


class Variable(_Assignable, metaclass=_VariableMeta):
    """A mutable array (``tf.Variable``). Outside any strategy it is a single copy."""

    def __init__(self, initial_value: Any = None, trainable: bool | None = None, validate_shape: bool = True,
                 caching_device: Any = None, name: str | None = None, variable_def: Any = None,
                 dtype: Any = None, import_scope: Any = None, constraint: Any = None,
                 synchronization: Any = VariableSynchronization.AUTO,
                 aggregation: Any = VariableAggregation.NONE, shape: Any = None) -> None:
        sync, agg, trainable = validate_synchronization_aggregation_trainable(
            synchronization, aggregation, trainable, name)
        self._init_common(_initial_array(initial_value, dtype, shape), name, trainable, sync, agg, constraint)

    def _init_common(self, value: Any, name: str | None, trainable: bool, synchronization: Any,
                     aggregation: Any, constraint: Any = None) -> None:
        self._value = value
        self._serial = next(_CREATED)  # creation order (a tape lists its watched variables in it)
        self._constraint = constraint
        self._name = f"{current_frontend().name_scope()}{name or 'Variable'}:0"
        self._trainable = self._created_trainable = trainable
        self._synchronization = synchronization
        self._aggregation = aggregation
        self._dtype = STRING if is_string(value.dtype) else np.dtype(value.dtype)
        self._shape = tuple(value.shape)

    # -- properties -------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def path(self) -> str:
        """Keras 3's ``path`` of a Keras weight or optimizer variable (``sequential/dense/kernel``: the layers'
        names, without TF's name scopes); other variables have none, as TF's."""
        path = self.__dict__.get("_keras_path")
        if path is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute 'path' (only Keras' variables "
                                 "have one)")
        return path

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        """Set by Keras layers frozen or unfrozen, as on a Keras variable (TF's own variables have no setter). Tapes
        keep watching the variable as created (``_created_trainable``), as TF's tape watches the TF variable a
        Keras variable wraps."""
        self._trainable = bool(value)

    def _tape_leaf(self) -> Any:
        """What a recording ``GradientTape`` reads: a tracked leaf whose gradient goes to this variable when a tape
        watches it (the frontend's ``variable_leaf``); else itself."""
        return current_frontend().variable_leaf(self)

    @property
    def synchronization(self) -> VariableSynchronization:
        return self._synchronization

    @property
    def aggregation(self) -> VariableAggregation:
        return self._aggregation

    @property
    def device(self) -> str:
        return "/job:localhost/replica:0/task:0/device:CPU:0"

    @property
    def constraint(self) -> Any:
        """The ``constraint`` given at creation (optimizers apply it), or None."""
        return self._constraint

    def get_shape(self) -> tuple[int, ...]:
        """The shape (TF's alias of ``shape``)."""
        return self.shape

    def is_initialized(self) -> bool:
        """Always True: variables get their value when created (eager)."""
        return True

    def ref(self) -> "VariableRef":
        """A hashable reference to this variable (variables themselves compare element-wise)."""
        return VariableRef(self)

    @property
    def initial_value(self) -> Any:
        """Unavailable, as in TF's eager mode (read the variable instead)."""
        raise RuntimeError("This property is not supported when eager execution is enabled.")

    # -- reads and writes -------------------------------------------------------------------------

    def _read(self) -> Any:
        return self._value

    def _new_value(self, current: Any, kind: str, value: Any) -> Any:
        """The array after applying ``kind`` (assign/assign_add/assign_sub) of ``value`` to ``current``,
        computed where ``current`` lives (its GPU for CuPy; NumPy or host values are copied there)."""
        if is_scatter(kind):
            return frozen(scatter_rows(current, kind, value, self._dtype))
        if kind in SCATTER_ND_KINDS:
            updates = _convert(value.updates, self._dtype)
            return frozen(scatter_nd(current, kind, value.indices, updates, self._dtype))
        if isinstance(current, _HOST) and isinstance(value, _HOST):  # (no device to enter or move to)
            return self._apply(current, kind, _convert(value, self._dtype))
        with device_of(value):
            value = _convert(value, self._dtype)
        with device_of(current):
            return self._apply(current, kind, like(value, current))

    def _apply(self, current: Any, kind: str, value: Any) -> Any:
        if kind == "assign":
            if tuple(value.shape) != self._shape:
                raise ValueError(f"Cannot assign value to variable ' {self._name}': Shape mismatch."
                                 f"The variable shape {self._shape}, and the assigned value shape "
                                 f"{tuple(value.shape)} are incompatible.")
            return frozen(_own_copy(value) if isinstance(value, np.ndarray) or is_cupy(value) else value)
        if self._dtype == STRING or self._dtype.kind == "b":
            op = "AssignAddVariableOp" if kind == "assign_add" else "AssignSubVariableOp"
            example = "v.assign(v + suffix)" if self._dtype == STRING else "v.assign(v | x)"
            raise errors.InvalidArgumentError(
                f"No OpKernel was registered to support Op '{op}' used by {{{{node {op}}}}} with these attrs: "
                f"[dtype=DT_{dtype_name(self._dtype).upper()}]\nFix: {dtype_name(self._dtype)} variables only take "
                f"assign (e.g. {example}).")
        if tuple(value.shape) != self._shape:
            raise errors.InvalidArgumentError(
                f"Cannot update variable with shape {list(self._shape)} using a Tensor with shape "
                f"{list(value.shape)}, shapes must be equal. (variable '{self._name}', {kind})")
        result = current + value if kind == "assign_add" else current - value
        return frozen(result.astype(self._dtype, copy=False))

    def _update(self, kind: str, value: Any, read_value: bool) -> Any:
        """Apply the update; returns what ``assign`` returns (the variable, whose reads see the new value)."""
        self._value = self._new_value(self._value, kind, value)
        return self if read_value else None

    def _relocate(self, reference: Any) -> None:
        """Move the value to ``reference``'s array module and device (see ``keras.Model``)."""
        self._value = frozen(like(self._value, reference))

    # -- checkpoint hooks -------------------------------------------------------------------------

    def _save_value(self) -> Any:
        """The value a checkpoint stores (a collective for ON_READ SUM/MEAN variables)."""
        return self._read()

    def _restore_value(self, value: Any) -> None:
        """Load a value read from a checkpoint."""
        self._update("assign", value, read_value=False)

    def __repr__(self) -> str:
        return _var_repr(self._name, self._shape, self._dtype, self._read())

    def sparse_read(self, indices: Any, name: Any = None) -> Any:
        """The rows at ``indices`` (``tf.gather`` of the value; differentiable on a tape)."""
        return current_frontend().gather(self, indices)

    def gather_nd(self, indices: Any, name: Any = None) -> Any:
        """The slices at the index tuples in ``indices`` (``tf.gather_nd`` of the value)."""
        return current_frontend().gather_nd(self, indices)


def _numpy_text(value: Any) -> str:
    """A value as TF writes a tensor's NumPy value in reprs and messages: ``0.0`` for a scalar, else
    ``array([...], dtype=...)``."""
    array = np.asarray(to_host(value))
    return str(array[()]) if array.ndim == 0 else repr(array)


def _var_repr(name: str, shape: tuple, dtype: np.dtype, value: Any) -> str:
    """TF's variable repr: a value that takes several lines starts on a line of its own."""
    text = _numpy_text(value)
    text = f"\n{text}" if "\n" in text else text
    return f"<mirrorlab.Variable '{name}' shape={shape} dtype={dtype_name(dtype)}, numpy={text}>"


class VariableRef:
    """What ``Variable.ref()`` returns: hashable and equal by the variable's identity; ``deref()`` gives it back."""

    def __init__(self, variable: Any) -> None:
        self._variable = variable

    def deref(self) -> Any:
        """The referenced variable."""
        return self._variable

    def __hash__(self) -> int:
        return id(self._variable)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VariableRef) and other._variable is self._variable

    def __repr__(self) -> str:
        return f"<Reference wrapping {self._variable!r}>"
