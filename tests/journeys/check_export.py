#!/usr/bin/env python3
"""Checks an `--export-dir` set the way the trainers read it (the journeys suite runs it).

    python3 tests/journeys/check_export.py EXPORT_DIR [SOURCE_RECIPE]

- `tuned.yaml` is read with PyYAML's safe loader, as TRL's `TrlParser` reads `--config` (trl
  1.15.0 `scripts/utils.py`, `yaml.safe_load`): each key that is a field of the dataclasses
  `trl grpo` parses (crates/grpofit-core/src/contract/field_types.json, by tools/contract/field_types.py: its
  `pinned` keys) must hold a value of a type some modelled release declares, as read (the
  parser sets it as the field's default, unconverted). With SOURCE_RECIPE, the keys whose value
  differs from the source's and those the export dropped are listed.
- `run.toml` (a run without recipe) is read with tomllib: `[grpo]` against GRPOConfig, `[model]`
  against ModelConfig (trl stack), `[lora]` against PEFT's LoraConfig, whose `target_modules`
  "all-linear" only expands as a string (peft 0.21.2 `_maybe_include_all_linear_layers`).
- `accelerate.yaml`'s keys against accelerate's ClusterConfig (the contract, trainers.json).
- `launch.sh`: its `accelerate launch` lines.

Prints one JSON object; exits 0 (the caller asserts on it).
"""

import json
import re
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
TYPES = json.loads((ROOT / "crates/grpofit-core/src/contract/field_types.json").read_text())
FIELDS = TYPES["classes"]
PINNED = TYPES["pinned"]["keys"]
CONTRACT = json.loads((ROOT / "crates/grpofit-core/src/contract/trainers.json").read_text())["calls"]


def split_top(text: str, sep: str) -> list:
    """`text` split on `sep` outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[("
        depth -= ch in "])"
        if ch == sep and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def fits(value, ann: str) -> bool:
    """Whether `value`, as PyYAML / tomllib read it, is of the annotated type `ann`."""
    ann = ann.strip()
    for wrap in ("Optional[", "Union["):
        if ann.startswith(wrap):
            inner = split_top(ann[len(wrap):-1], ",")
            return value is None or any(fits(value, a) for a in inner) if wrap == "Optional[" \
                else any(fits(value, a) for a in inner)
    alts = split_top(ann, "|")
    if len(alts) > 1:
        return any(fits(value, a) for a in alts)
    if ann == "None":
        return value is None
    if ann == "bool":
        return isinstance(value, bool)
    if ann == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if ann == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if ann == "str":
        return isinstance(value, str)
    if ann.startswith("Literal["):
        return value in [ast_value(a) for a in split_top(ann[8:-1], ",")]
    if ann.startswith(("list[", "List[")):
        inner = ann[5:-1]
        return isinstance(value, list) and all(fits(v, inner) for v in value)
    if ann in ("list", "List"):
        return isinstance(value, list)
    if ann.startswith(("dict", "Dict")):
        return isinstance(value, dict)
    if ann == "Any":
        return True
    # an enum of strings (SchedulerType, IntervalStrategy, ...): its value is a string
    return isinstance(value, str)


def ast_value(text: str):
    import ast
    return ast.literal_eval(text)


def check_fields(values: dict, classes: list, where: str, out: dict) -> None:
    for key, value in values.items():
        anns = [a for c in classes if key in PINNED[c] for a in FIELDS[c][key]]
        if not anns:
            out["unknown"].append(f"{where}{key}")
            continue
        if key == "lora_target_modules" and value == "all-linear":
            # ModelConfig.__post_init__ makes a one-item list its string; PEFT expands the string
            continue
        if not any(fits(value, a) for a in anns):
            out["type_errors"].append(f"{where}{key} = {value!r}: declared {' / '.join(anns)}")


def check_recipe(path: Path, source: Path | None, out: dict) -> None:
    tuned = yaml.safe_load(path.read_text())
    out["tuned"] = tuned
    parsed = ["GRPOScriptArguments", "GRPOConfig", "ModelConfig", "DatasetMixtureConfig"]
    check_fields(tuned, parsed, "", out)
    if source is not None:
        before = yaml.safe_load(source.read_text())
        out["dropped"] = sorted(k for k in before if k not in tuned)
        out["changed"] = {k: [before[k], tuned[k]] for k in before if k in tuned and before[k] != tuned[k]}
        out["added"] = sorted(k for k in tuned if k not in before)


def check_run_file(path: Path, out: dict) -> None:
    run = tomllib.loads(path.read_text())
    out["run"] = run
    check_fields(run.get("grpo", {}), ["GRPOConfig"], "[grpo] ", out)
    if run.get("grpofit", {}).get("stack") == "trl":
        check_fields(run.get("model", {}), ["ModelConfig"], "[model] ", out)
    unsloth = run.get("grpofit", {}).get("stack") == "unsloth"
    calls = {"lora": "unsloth.FastLanguageModel.get_peft_model" if unsloth else "peft.LoraConfig"}
    if unsloth:
        calls["model"] = "unsloth.FastLanguageModel.from_pretrained"
    for table, call in calls.items():
        takes = CONTRACT[call]["params"]
        out["unknown"] += [f"[{table}] {k}" for k in run.get(table, {}) if k not in takes]
    targets = run.get("lora", {}).get("target_modules")
    if isinstance(targets, list) and "all-linear" in targets:
        out["type_errors"].append(
            f"[lora] target_modules = {targets!r}: PEFT expands \"all-linear\" only as a string")


def main() -> None:
    folder = Path(sys.argv[1])
    source = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    out = {"files": sorted(p.name for p in folder.iterdir()), "unknown": [], "type_errors": []}
    if (folder / "tuned.yaml").exists():
        check_recipe(folder / "tuned.yaml", source, out)
    if (folder / "run.toml").exists():
        check_run_file(folder / "run.toml", out)
    if (folder / "accelerate.yaml").exists():
        acc = yaml.safe_load((folder / "accelerate.yaml").read_text())
        known = CONTRACT["accelerate.ClusterConfig"]["params"]
        out["accelerate"] = acc
        out["unknown"] += [f"accelerate.yaml {k}" for k in acc if k not in known]
    sh = (folder / "launch.sh").read_text() if (folder / "launch.sh").exists() else ""
    out["launch"] = [l for l in sh.splitlines() if re.search(r"^[A-Z_]+=\S* accelerate launch|^accelerate launch|^python ", l)]
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
