"""``keras.saving``: object configs (``serialize_keras_object``/``deserialize_keras_object``, registration of
custom classes) and whole-model ``.keras`` files (``save_model``/``load_model``)."""

from .model_file import load_model, save_model
from .serialization import (CustomObjectScope, custom_object_scope, deserialize_keras_object, get_registered_name,
                            get_registered_object, register_keras_serializable, serialize_keras_object)

__all__ = ["CustomObjectScope", "custom_object_scope", "deserialize_keras_object", "get_registered_name",
           "get_registered_object", "load_model", "register_keras_serializable", "save_model",
           "serialize_keras_object"]
