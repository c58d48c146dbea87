"""A run file (README "The trainers targeted": one table per trainer call) from what a notebook
holds: dicts, or the trainers' own objects (a TRL ``GRPOConfig``, a PEFT ``LoraConfig``, a TRL
``ModelConfig``), read through ``dataclasses.fields`` or ``to_dict()``; never by importing them.

Which keys a table may hold, and what a missing one means, is the binary's business (the
trainer contract it carries): this module only writes what it is given as TOML.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import re
import warnings
from collections.abc import Mapping
from typing import Any, Dict, Optional

from ._errors import ArgumentError, ArgumentTypeError

# the tables of a run file, in the order the binary's export writes them (grpofit-core contract::Table::ALL)
TABLES = ("grpofit", "model", "lora", "grpo", "env", "distributed", "vllm_server")

Tables = Dict[str, Dict[str, Any]]


def keyword_arguments(obj: Any, what: str) -> Dict[str, Any]:
    """The keyword arguments `obj` stands for: a dict as given; of a dataclass (GRPOConfig,
    LoraConfig, ModelConfig), the init fields whose value is not the field's own default (a
    field left at its default is the call's default, which the binary knows); else `to_dict()`."""
    if isinstance(obj, Mapping):
        return dict(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        kwargs = {}
        for f in dataclasses.fields(obj):
            if not f.init or not hasattr(obj, f.name):
                continue
            value = getattr(obj, f.name)
            if not _is_default(value, f):
                kwargs[f.name] = value
        return _without_derived(obj, kwargs)
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    raise ArgumentTypeError(
        f"{what}: expected a dict, a dataclass such as GRPOConfig, LoraConfig or ModelConfig, "
        f"or an object with to_dict(); got {type(obj).__name__}"
    )


def _is_default(value: Any, f: dataclasses.Field) -> bool:
    if f.default is not dataclasses.MISSING:
        default = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        default = f.default_factory()  # type: ignore[misc]
    else:
        return False
    try:
        return bool(_plain(value) == _plain(default))
    except Exception:  # values that cannot be compared are written
        return False


def _without_derived(obj: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """A GRPOConfig's `steps_per_generation` and `generation_batch_size` after its
    `__post_init__` (trl 1.15.0, trl/trainer/grpo_config.py, GRPOConfig.__post_init__): TRL
    refuses both being given, and sets the one left out from the other, or both from
    `gradient_accumulation_steps` when neither was. Written both, they would pin the batch the
    fit is free to change: `generation_batch_size` is dropped when `steps_per_generation` is
    set, and `steps_per_generation` too when it is the accumulation it defaults to."""
    if kwargs.get("generation_batch_size") is None or getattr(obj, "steps_per_generation", None) is None:
        return kwargs
    kwargs = dict(kwargs)
    kwargs.pop("generation_batch_size", None)
    if obj.steps_per_generation == getattr(obj, "gradient_accumulation_steps", None):
        kwargs.pop("steps_per_generation", None)
    return kwargs


# TRL ModelConfig's adapter fields and the PEFT LoraConfig keyword each becomes (trl 1.15.0
# `trl/trainer/utils.py` `get_peft_config`); the binary's own copy, which a test holds this to:
# grpofit-core `config::source::MODEL_LORA_KEYS`
MODEL_LORA_KEYS = (
    ("lora_r", "r"),
    ("lora_alpha", "lora_alpha"),
    ("lora_dropout", "lora_dropout"),
    ("lora_target_modules", "target_modules"),
    ("lora_target_parameters", "target_parameters"),
    ("lora_modules_to_save", "modules_to_save"),
    ("lora_task_type", "task_type"),
    ("use_rslora", "use_rslora"),
    ("use_dora", "use_dora"),
)


def is_model_config(obj: Any) -> bool:
    """A TRL `ModelConfig` (told apart by its fields, never imported)."""
    if isinstance(obj, Mapping) or not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return False
    names = {f.name for f in dataclasses.fields(obj)}
    return {"use_peft", "lora_r", "model_name_or_path"} <= names


def split_model_config(obj: Any, lora_given: bool):
    """A TRL `ModelConfig` as TRL runs it: ([model] keywords, [lora] keywords or None). Its
    `lora_*` fields are no keywords of the model's call: TRL's `get_peft_config(model_args)`
    builds the adapter from them, ModelConfig's own defaults included (r 16, lora_alpha 32,
    lora_dropout 0.05), and returns None without `use_peft`, training every weight. With a
    `lora` of the caller's, that is the adapter, and the fields are left out."""
    model = {k: v for k, v in keyword_arguments(obj, "model").items() if k not in dict(MODEL_LORA_KEYS)}
    model.pop("use_peft", None)
    if lora_given:
        if obj.use_peft:
            model["use_peft"] = True
        return model, None
    model["use_peft"] = bool(obj.use_peft)
    if not obj.use_peft:
        return model, None
    lora = {to: getattr(obj, key) for key, to in MODEL_LORA_KEYS if hasattr(obj, key)}
    return model, lora


def _plain(value: Any) -> Any:
    """`value` as TOML can hold it: an Enum's value, a set sorted into a list, a dataclass as a
    dict; None where TOML has no such value (None itself, NaN, an object)."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=str) if None not in items else None
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return items if None not in items else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        items = {str(k): _plain(v) for k, v in value.items()}
        return {k: v for k, v in items.items() if v is not None}
    return None


def table_of(kwargs: Mapping[str, Any], table: str) -> Dict[str, Any]:
    """The TOML values of `kwargs`: None dropped (TOML has none; the call's default stands), and
    a value TOML cannot hold dropped with a warning naming it."""
    out = {}
    for key, value in kwargs.items():
        plain = _plain(value)
        if plain is None:
            if value is not None:
                warnings.warn(
                    f"grpofit: [{table}] {key} = {value!r}: not written into the run file (not a TOML value)",
                    stacklevel=4,
                )
            continue
        out[str(key)] = plain
    return out


def infer_stack(model: Any, lora: Any) -> Optional[str]:
    """The stack the given tables are written for, when they say: TRL's `ModelConfig` names its
    model `model_name_or_path`, Unsloth's `from_pretrained` `model_name`; a PEFT `LoraConfig`
    object is TRL's (Unsloth takes `get_peft_model`'s keywords, a dict)."""
    names = keyword_arguments(model, "model") if model is not None else {}
    if "model_name_or_path" in names or (lora is not None and type(lora).__name__ == "LoraConfig"):
        return "trl"
    if "model_name" in names:
        return "unsloth"
    return None


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")

# TOML 1.0's short escapes in a basic string; every other control character (U+0000 to U+001F,
# U+007F) is written \uXXXX, everything else as itself (the file is UTF-8)
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
# TOML's integers are 64-bit signed
_I64 = (-(1 << 63), (1 << 63) - 1)


def _string(text: str) -> str:
    """`text` as a TOML basic string. A lone surrogate (a str Python decoded with
    `surrogateescape`, or half of a pair) is no Unicode scalar value: TOML cannot hold it."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ArgumentError(
                f"{text!r}: holds the lone surrogate U+{code:04X}, which a TOML file (UTF-8) cannot hold"
            )
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _key(key: str) -> str:
    return key if _BARE.match(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not _I64[0] <= value <= _I64[1]:
            raise ArgumentError(f"{value}: out of TOML's 64-bit integer range")
        return str(value)
    if isinstance(value, float):
        # repr is the shortest text that reads back the same float; TOML spells it alike
        # (`0.45`, `1e-05`, `1e+16`), and _plain has dropped inf and nan
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise ArgumentTypeError(f"not a TOML value: {value!r}")


def to_toml(tables: Tables) -> str:
    """The run file's text: each table in the export's order, then any other the caller named
    (the binary says what is wrong with it)."""
    order = [t for t in TABLES if t in tables] + [t for t in tables if t not in TABLES]
    lines = ["# written by the grpofit Python package"]
    for name in order:
        lines.append("")
        lines.append(f"[{_key(name)}]")
        for key, value in tables[name].items():
            lines.append(f"{_key(key)} = {_value(value)}")
    return "\n".join(lines) + "\n"
