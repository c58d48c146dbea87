"""Shared by the tests of the grpofit Python package: the repository's files, and stand-ins for
the trainers' config classes built from the pinned contract (crates/grpofit-core/src/contract/trainers.json)."""

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "crates" / "grpofit-core" / "src" / "contract" / "trainers.json"


def stand_in(call: str, name: str):
    """A dataclass shaped like the trainer's class `call` names in the contract: one init field
    per keyword argument, with the pinned default (a default the contract could not evaluate,
    such as PEFT's `runtime_config = LoraRuntimeConfig()`, becomes an empty dict)."""
    params = json.loads(CONTRACT.read_text())["calls"][call]["params"]
    fields = []
    for key, spec in params.items():
        if "default" not in spec:
            fields.append((key, Any, dataclasses.field(default_factory=dict)))
        elif isinstance(spec["default"], (dict, list)):
            value = spec["default"]
            fields.append((key, Any, dataclasses.field(default_factory=lambda v=value: copy.deepcopy(v))))
        else:
            fields.append((key, Any, dataclasses.field(default=spec["default"])))
    return dataclasses.make_dataclass(name, fields)


@pytest.fixture(scope="session")
def GRPOConfig():
    return stand_in("trl.GRPOConfig", "GRPOConfig")


@pytest.fixture(scope="session")
def LoraConfig():
    return stand_in("peft.LoraConfig", "LoraConfig")


@pytest.fixture(scope="session")
def ModelConfig():
    return stand_in("trl.ModelConfig", "ModelConfig")
