#!/usr/bin/env python3
"""The Unsloth and vLLM calls of each release line grpofit models: keyword arguments and defaults.

The siblings of ladder.py (TRL's GRPOConfig), read the same way (`pip download --no-deps`,
`ast`, nothing imported):

- `unsloth_ladder.json`: for each Unsloth release, the keywords and literal defaults of
  `FastLanguageModel.from_pretrained` (unsloth/models/loader.py) and
  `FastLanguageModel.get_peft_model` (unsloth/models/llama.py, FastLlamaModel.get_peft_model,
  which FastLanguageModel's wraps); the `unsloth_zoo` release its METADATA requires (the lowest
  `unsloth_zoo>=` allows); which `load_vllm` keywords `from_pretrained` fills from its own
  parameters when `fast_inference=True` (llama.py, FastLlamaModel.from_pretrained,
  `load_vllm_kwargs = dict(...)`; any other `load_vllm` keyword in its `**kwargs` is passed on
  too: `for allowed_arg in allowed_args`), and which keywords `load_vllm` hands to vLLM's
  `LLM(...)` (unsloth_zoo/vllm_utils.py, load_vllm, `engine_args = dict(...)`), each with the
  `load_vllm` parameters it is computed from; and the fields Unsloth's own config class adds to
  TRL's `GRPOConfig` (unsloth/models/rl.py, the `class Unsloth{RLConfig_name}` of its
  `RLTrainer_replacement` template: `vllm_sampling_params`, `unsloth_num_chunks` ...), which a
  run's `[grpo]` may set on the unsloth stack.
- `vllm_ladder.json`: for each vLLM release, the fields and literal defaults of `EngineArgs`
  (vllm/engine/arg_utils.py, which `LLM(...)` builds from its keywords), defaults that point
  at a config class (`CacheConfig.gpu_memory_utilization`, `get_field(ModelConfig, ...)`)
  read from vllm/config.py or vllm/config/*.py. Only those files are unpacked from the wheel.

    python3 tools/contract/stack_ladders.py            # rewrite both ladder files
    python3 tools/contract/stack_ladders.py --check    # fail when the pinned wheels say otherwise
"""

import argparse
import ast
import difflib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import extract  # noqa: E402  (the same wheel reader)

HERE = extract.ROOT / "crates" / "grpofit-core" / "src" / "contract"
UNSLOTH_OUT = HERE / "unsloth_ladder.json"
VLLM_OUT = HERE / "vllm_ladder.json"
SERVE_OUT = HERE / "trl_serve_ladder.json"

# Oldest first; a release not listed takes the nearest older rung of its line or before.
UNSLOTH = [
    "2025.2.4",  # the first GRPO patch (PatchFastRL), fast_inference
    "2025.2.15",
    "2025.3.19",  # full_finetuning, load_in_8bit
    "2025.5.2",
    "2025.5.9",
    "2025.8.9",  # get_peft_model's qat_scheme
    "2025.11.6",  # load_in_fp8, load_in_16bit, offload_embedding
    "2026.1.4",
    "2026.10.9",  # grpofit's targeted release
]

# The vLLM releases TRL's `vllm` extra installs, 0.7.2 (trl 0.15) to 0.31.0 (trl 1.15's newest).
VLLM = [
    "0.7.2",  # trl 0.15.2's vllm==0.7.2
    "0.8.5",
    "0.10.2",
    "0.11.0",
    "0.12.0",  # trl 0.29's vllm<0.13
    "0.17.1",  # trl 1.0's vllm>=0.17.1
    "0.23.0",  # trl 1.7's
    "0.28.0",  # trl 1.13's vllm<=0.28.0
    "0.31.0",  # trl 1.15's vllm<=0.31.0, grpofit's targeted release
    "0.34.0",  # the newest release read
]

# The EngineArgs fields whose defaults the ladder keeps (the memory-relevant ones); every field
# is listed under "keys".
VLLM_DEFAULTS = [
    "block_size", "cpu_offload_gb", "data_parallel_size", "dtype", "enable_chunked_prefill",
    "enable_lora", "enable_prefix_caching", "enable_sleep_mode", "enforce_eager",
    "gpu_memory_utilization", "kv_cache_dtype", "max_lora_rank", "max_loras", "max_model_len",
    "max_num_batched_tokens", "max_num_seqs", "max_seq_len_to_capture", "quantization",
    "swap_space", "tensor_parallel_size",
]


def zoo_required(unsloth_root: Path, version: str) -> str:
    """The lowest unsloth_zoo the Unsloth wheel's METADATA requires (`unsloth_zoo>=X`)."""
    meta = unsloth_root / f"unsloth-{version}.dist-info" / "METADATA"
    m = re.search(r"^Requires-Dist: unsloth[_-]zoo>=([0-9.]+)\s*$", meta.read_text(encoding="utf-8"), re.M)
    if not m:
        sys.exit(f"{meta}: no `Requires-Dist: unsloth_zoo>=` line")
    return m.group(1)


def call_keywords(fn: ast.FunctionDef, target: str) -> dict:
    """`target = dict(k = expr, ...)` in `fn`, plus later `target["k"] = expr`: {k: expr}."""
    found = {}
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        t = node.targets[0]
        if isinstance(t, ast.Name) and t.id == target and isinstance(node.value, ast.Call) \
                and ast.unparse(node.value.func) == "dict" and not found:
            found = {k.arg: ast.unparse(k.value) for k in node.value.keywords if k.arg}
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == target \
                and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str) and found:
            found.setdefault(t.slice.value, ast.unparse(node.value))
    if not found:
        raise SystemExit(f"{fn.name}: no `{target} = dict(...)`")
    return dict(sorted(found.items()))


def depends_on(fn: ast.FunctionDef, expr: str, params: set) -> list:
    """The parameters of `fn` that the expression `expr` is computed from: its names, and the
    names every assignment in `fn` to a local among them uses, followed to the end (a rough
    def-use closure: any assignment counts, branches and all)."""
    feeds = {}
    for node in ast.walk(fn):
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets, value = [node.target], node.value
        names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} if value is not None else set()
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    feeds.setdefault(n.id, set()).update(names)
    seen, todo = set(), [n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in params:
            todo.extend(feeds.get(name, ()))
    return sorted(seen & params)


def function(tree: ast.AST, name: str, owner: str = None) -> ast.FunctionDef:
    """The function `name` (in class `owner` when given) of a module."""
    body = tree.body
    if owner:
        cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == owner), None)
        if cls is None:
            raise SystemExit(f"class {owner} not found")
        body = cls.body
    fn = next((n for n in body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if fn is None:
        raise SystemExit(f"{owner or ''}.{name} not found")
    return fn


def config_fields(rl_py: Path) -> dict:
    """The fields (and literal defaults) Unsloth's config class adds to TRL's: the dataclass
    `Unsloth{RLConfig_name}` in unsloth/models/rl.py's `RLTrainer_replacement` template, up to
    its `__init__`, with the template's `{placeholders}` dropped and `{{ }}` unescaped. Empty
    for a release without the template (2025.2.4 patches TRL's trainer without a config class)."""
    if not rl_py.is_file():
        return {}
    tree = ast.parse(rl_py.read_text(encoding="utf-8"))
    template = next((n.value.value for n in tree.body if isinstance(n, ast.Assign)
                     and [ast.unparse(t) for t in n.targets] == ["RLTrainer_replacement"]
                     and isinstance(n.value, ast.Constant)), None)
    if template is None:
        return {}
    start = template.find("class Unsloth{RLConfig_name}")
    end = template.find("def __init__", start)
    if start < 0 or end < 0:
        return {}
    lines = template[start:end].splitlines()[1:]
    body = [l.replace("{{", "{").replace("}}", "}") for l in lines if not re.fullmatch(r"\s*\{\w+\}\s*", l)]
    cls = ast.parse("class C:\n" + "\n".join(body)).body[0]
    fields = {}
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)) or stmt.target.id.startswith("_"):
            continue
        default = None
        if isinstance(stmt.value, ast.Call):
            kw = {k.arg: k.value for k in stmt.value.keywords}
            try:
                default = ast.literal_eval(kw["default"]) if "default" in kw else None
            except ValueError:
                default = None
        fields[stmt.target.id] = default
    return dict(sorted(fields.items()))


def keys_and_defaults(params: dict, var_kwargs: bool) -> dict:
    return {
        "accepts_other_kwargs": var_kwargs,
        "defaults": {k: v["default"] for k, v in sorted(params.items()) if "default" in v},
        "keys": sorted(params),
    }


def unsloth_rung(version: str) -> dict:
    root = extract.fetch("unsloth", version)
    zoo_version = zoo_required(root, version)
    zoo_root = extract.fetch("unsloth_zoo", zoo_version)
    source = extract.Source({"unsloth": root, "unsloth_zoo": zoo_root})
    loader = source.module("unsloth.models.loader")
    # unsloth/models/loader.py, FastLanguageModel.from_pretrained
    params, kw = extract.function_params(source, loader, "FastLanguageModel", "from_pretrained")
    from_pretrained = keys_and_defaults(params, kw)
    # unsloth/models/llama.py, FastLlamaModel.get_peft_model (FastLanguageModel's wraps it)
    params, kw = extract.function_params(source, loader, "FastLanguageModel", "get_peft_model")
    get_peft_model = keys_and_defaults(params, kw)
    # unsloth/models/llama.py, FastLlamaModel.from_pretrained: `load_vllm_kwargs = dict(...)`
    llama = source.module("unsloth.models.llama")
    to_load_vllm = call_keywords(function(llama.tree, "from_pretrained", "FastLlamaModel"), "load_vllm_kwargs")
    # unsloth_zoo/vllm_utils.py, load_vllm: its keywords, and `engine_args = dict(...)` for LLM(...)
    zoo = source.module("unsloth_zoo.vllm_utils")
    params, kw = extract.module_function_params(zoo, source, "load_vllm")
    load_vllm = function(zoo.tree, "load_vllm")
    to_llm = {
        key: {"expr": expr, "from": depends_on(load_vllm, expr, set(params))}
        for key, expr in call_keywords(load_vllm, "engine_args").items()
    }
    return {
        "unsloth_zoo": zoo_version,
        "from_pretrained": from_pretrained,
        "get_peft_model": get_peft_model,
        "load_vllm": {**keys_and_defaults(params, kw), "from_pretrained_fills": to_load_vllm},
        "llm_engine_args": to_llm,
        "grpo_config": config_fields(root / "unsloth" / "models" / "rl.py"),
    }


def vllm_sources(version: str) -> Path:
    """vllm/engine/arg_utils.py and vllm/config*.py of the vLLM wheel, unpacked alone (the
    wheel is hundreds of megabytes; nothing else is read)."""
    base = extract.wheels_dir()
    unpacked = base / f"vllm-{version}-config"
    if unpacked.is_dir():
        return unpacked
    found = sorted(base.glob(f"vllm-{version}-*.whl"))
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--only-binary", ":all:",
             "--dest", str(base), f"vllm=={version}"],
            check=True,
        )
        found = sorted(base.glob(f"vllm-{version}-*.whl"))
    if not found:
        sys.exit(f"pip downloaded no wheel for vllm=={version}")
    wanted = re.compile(r"^vllm/(engine/arg_utils\.py|config\.py|config/[a-z_0-9]+\.py)$")
    tmp = base / f".vllm-{version}-config.tmp"
    with zipfile.ZipFile(found[0]) as z:
        for name in z.namelist():
            if wanted.match(name):
                z.extract(name, tmp)
    tmp.rename(unpacked)
    return unpacked


def field_default(source, mod, cls: ast.ClassDef, name: str):
    """The literal default of dataclass field `name` of `cls`: `x: T = 1`, `= Field(default=1)`,
    `= field(default=1)`; raises ValueError when it is not a constant."""
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            value = stmt.value
            if value is None:
                raise ValueError
            if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in ("Field", "field"):
                kw = {k.arg: k.value for k in value.keywords}
                if "default" not in kw:
                    raise ValueError
                value = kw["default"]
            return vllm_literal(source, mod, value)
    raise ValueError


def vllm_literal(source, mod, node, depth=0):
    """extract.literal, and the defaults EngineArgs borrows from the config classes:
    `CacheConfig.gpu_memory_utilization` and `get_field(ModelConfig, "max_model_len")`."""
    if depth > 6:
        raise ValueError
    try:
        return extract.literal(source, mod, node)
    except ValueError:
        pass
    cls_name = attr = None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        cls_name, attr = node.value.id, node.attr
    elif isinstance(node, ast.Call) and ast.unparse(node.func) == "get_field" and len(node.args) == 2 \
            and isinstance(node.args[0], ast.Name) and isinstance(node.args[1], ast.Constant):
        cls_name, attr = node.args[0].id, node.args[1].value
    if cls_name is None:
        raise ValueError
    found = source.lookup(mod, cls_name)
    if not found or not isinstance(found[1], ast.ClassDef):
        raise ValueError
    return field_default(source, found[0], found[1], attr)


def vllm_rung(version: str) -> dict:
    source = extract.Source({"vllm": vllm_sources(version)})
    args = source.module("vllm.engine.arg_utils")
    found = source.lookup(args, "EngineArgs")
    if not found or not isinstance(found[1], ast.ClassDef):
        sys.exit(f"vllm {version}: EngineArgs not found in vllm/engine/arg_utils.py")
    mod, cls = found
    keys, defaults = [], {}
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        key = stmt.target.id
        if key.startswith("_") or "ClassVar" in ast.unparse(stmt.annotation):
            continue
        keys.append(key)
        if key in VLLM_DEFAULTS and stmt.value is not None:
            try:
                defaults[key] = vllm_literal(source, mod, stmt.value)
            except ValueError:
                pass
    return {"defaults": dict(sorted(defaults.items())), "keys": sorted(keys)}


def serve_rung(version: str):
    root = extract.fetch("trl", version)
    source = extract.Source({"trl": root})
    serve = source.module("trl.scripts.vllm_serve")
    if serve is None:
        return None
    params = extract.dataclass_fields(source, serve, "ScriptArguments")
    return {
        "defaults": {k: v["default"] for k, v in sorted(params.items()) if "default" in v},
        "keys": sorted(params),
    }


def serve_ladder() -> dict:
    import ladder  # the TRL releases GRPOConfig's ladder reads

    return {
        "about": "Generated by tools/contract/stack_ladders.py from the pinned TRL wheels (trl/scripts/vllm_serve.py ScriptArguments); do not edit by hand.",
        "releases": {v: serve_rung(v) for v in ladder.LADDER},
    }


def unsloth_ladder() -> dict:
    return {
        "about": "Generated by tools/contract/stack_ladders.py from the pinned Unsloth and unsloth_zoo wheels; do not edit by hand.",
        "releases": {v: unsloth_rung(v) for v in UNSLOTH},
    }


def vllm_ladder() -> dict:
    return {
        "about": "Generated by tools/contract/stack_ladders.py from the pinned vLLM wheels (EngineArgs); do not edit by hand.",
        "releases": {v: vllm_rung(v) for v in VLLM},
    }


def write_or_check(out: Path, data: dict, check: bool, what: str) -> bool:
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if check:
        old = out.read_text(encoding="utf-8") if out.exists() else ""
        if old != text:
            diff = difflib.unified_diff(old.splitlines(), text.splitlines(), "checked-in", "from the wheels", lineterm="")
            print("\n".join(list(diff)[:200]))
            print(f"{out}: the {what} ladder drifted from the pinned wheels; run tools/contract/stack_ladders.py")
            return False
        print(f"{out}: matches the pinned wheels ({what} {', '.join(data['releases'])})")
        return True
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    print(f"wrote {out}: {len(data['releases'])} {what} releases")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the checked-in files, write nothing")
    args = ap.parse_args()
    ok = write_or_check(UNSLOTH_OUT, unsloth_ladder(), args.check, "Unsloth")
    ok &= write_or_check(VLLM_OUT, vllm_ladder(), args.check, "vLLM")
    ok &= write_or_check(SERVE_OUT, serve_ladder(), args.check, "trl vllm-serve")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
