#!/usr/bin/env python3
"""The trainer contract: which keyword arguments each trainer call accepts, and its defaults.

Downloads the pinned wheels without their dependencies (`pip download --no-deps`: no torch
needed), reads their source with `ast` (nothing is imported or run), and writes
`crates/grpofit-core/src/contract/trainers.json`, which grpofit's loader, export and knob declarations read.

    python3 tools/contract/extract.py            # rewrite the contract file
    python3 tools/contract/extract.py --check    # fail when the pinned wheels say otherwise

The calls (docs/run-file.md: one trainer table = one call's keyword arguments):
  trl.GRPOConfig                              [grpo]
  peft.LoraConfig                             [lora] (trl stack)
  trl.ModelConfig                             [model] (trl stack)
  unsloth.FastLanguageModel.from_pretrained   [model] (unsloth stack)
  unsloth.FastLanguageModel.get_peft_model    [lora] (unsloth stack)
  unsloth_zoo.vllm_utils.load_vllm            [model] keywords from_pretrained forwards to vLLM's loader
  trl.vllm_serve.ScriptArguments              [vllm_server] the flags of `trl vllm-serve` (multi-GPU runs)
"""

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "crates" / "grpofit-core" / "src" / "contract" / "trainers.json"

# The versions grpofit targets (docs/run-file.md, "Versions"). Move them together and rerun.
PINS = {
    "trl": "1.15.0",
    "transformers": "5.17.0",
    "peft": "0.21.2",
    "unsloth": "2026.10.9",
    "unsloth_zoo": "2026.10.9",
    # the launch set of multi-GPU runs (accelerate.yaml, ds_config.json)
    "accelerate": "1.12.0",
    "deepspeed": "0.18.2",
}

# Published as a source archive only: read from the sdist, which pip downloads without building.
SDIST_ONLY = {"deepspeed"}


def wheels_dir() -> Path:
    d = Path(os.environ.get("GRPOFIT_WHEELS", ROOT / "target" / "wheels"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def fetch(package: str, version: str) -> Path:
    """The unpacked wheel of `package==version`, downloaded once into the wheels folder."""
    base = wheels_dir()
    unpacked = base / f"{package}-{version}"
    if unpacked.is_dir():
        return unpacked
    if package in SDIST_ONLY:
        return fetch_sdist(package, version)
    stem = package.replace("-", "_")
    found = [w for w in base.glob(f"{stem}-{version}-*.whl")]
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
             "--dest", str(base), f"{package}=={version}"],
            check=True,
        )
        found = [w for w in base.glob(f"{stem}-{version}-*.whl")]
    if not found:
        sys.exit(f"pip downloaded no wheel for {package}=={version}")
    tmp = base / f".{package}-{version}.tmp"
    with zipfile.ZipFile(found[0]) as z:
        z.extractall(tmp)
    tmp.rename(unpacked)
    return unpacked


def fetch_sdist(package: str, version: str) -> Path:
    """The unpacked source archive of `package==version` (its top folder holds the package)."""
    import tarfile
    base = wheels_dir()
    unpacked = base / f"{package}-{version}"
    archive = base / f"{package}-{version}.tar.gz"
    if not archive.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
             "--dest", str(base), f"{package}=={version}"],
            check=True,
        )
    tmp = base / f".{package}-{version}.tmp"
    with tarfile.open(archive) as t:
        t.extractall(tmp, filter="data")
    (tmp / f"{package}-{version}").rename(unpacked)
    tmp.rmdir()
    return unpacked


def string_constants(mod) -> dict:
    """`NAME = "text"` at the top of a module: the config keys DeepSpeed spells as constants."""
    keys = {}
    for node in mod.tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.isupper():
                    keys[node.value.value] = {"defined_in": f"{mod.dotted}.{target.id}"}
    return keys


def pydantic_keys(source, mod, name: str) -> dict:
    """The keys a pydantic config model reads: each field, and its `alias` when it has one."""
    found = source.lookup(mod, name)
    if not found or not isinstance(found[1], ast.ClassDef):
        raise SystemExit(f"class {name} not found from {mod.dotted}")
    cmod, cls = found
    keys = {}
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        key = stmt.target.id
        if key.startswith("_"):
            continue
        keys[key] = {"defined_in": f"{cmod.dotted}.{cls.name}"}
        if isinstance(stmt.value, ast.Call):
            for kw in stmt.value.keywords:
                if kw.arg == "alias" and isinstance(kw.value, ast.Constant):
                    keys[kw.value.value] = {"defined_in": f"{cmod.dotted}.{cls.name}", "alias_of": key}
    return keys


def subscript_keys(mod, variable: str) -> dict:
    """The string keys a module stores into `variable[...]`: the entries accelerate's
    questionnaire (`accelerate config`) writes into its `deepspeed_config` / `fsdp_config`."""
    keys = {}
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id == variable \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            keys[node.slice.value] = {"defined_in": f"{mod.dotted} ({variable})"}
    return dict(sorted(keys.items()))


class Module:
    """One source file: its top-level names, classes and `from x import y` lines."""

    def __init__(self, root: Path, dotted: str):
        self.root, self.dotted = root, dotted
        rel = Path(*dotted.split("."))
        path = root / rel.with_suffix(".py")
        if not path.exists():
            path = root / rel / "__init__.py"
        self.path = path
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.classes = {n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}
        self.assigns = {}
        self.imports = {}
        for node in self.tree.body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.assigns[t.id] = node.value
            elif isinstance(node, ast.ImportFrom) and node.module is not None or (
                isinstance(node, ast.ImportFrom) and node.level
            ):
                src = self.resolve_from(node)
                for a in node.names:
                    self.imports[a.asname or a.name] = (src, a.name)

    def resolve_from(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module
        parts = self.dotted.split(".")
        if self.path.name != "__init__.py":
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))


class Source:
    """Modules of the unpacked wheels, loaded on demand."""

    def __init__(self, roots):
        self.roots, self.cache = roots, {}

    def module(self, dotted: str):
        if dotted in self.cache:
            return self.cache[dotted]
        top = dotted.split(".")[0]
        root = self.roots.get(top)
        mod = None
        if root is not None:
            try:
                mod = Module(root, dotted)
            except (FileNotFoundError, SyntaxError):
                mod = None
        self.cache[dotted] = mod
        return mod

    def lookup(self, mod: Module, name: str, depth: int = 0):
        """(module, node) where `name` is defined, following `from ... import` across the wheels."""
        if depth > 8 or mod is None:
            return None
        if name in mod.classes:
            return mod, mod.classes[name]
        if name in mod.assigns:
            return mod, mod.assigns[name]
        if name in mod.imports:
            src, orig = mod.imports[name]
            found = self.lookup(self.module(src), orig, depth + 1)
            return found or self.find_class(src.split(".")[0], orig)
        return None

    def find_class(self, top: str, name: str):
        """A class a package exports lazily (transformers' `_import_structure`): the one module
        of the package that defines it at top level."""
        root = self.roots.get(top)
        if root is None:
            return None
        pattern = re.compile(rf"^class {re.escape(name)}\b", re.M)
        hits = [
            p for p in sorted((root / top).rglob("*.py"))
            if pattern.search(p.read_text(encoding="utf-8", errors="replace"))
        ]
        if len(hits) != 1:
            return None
        dotted = ".".join(hits[0].relative_to(root).with_suffix("").parts)
        mod = self.module(dotted)
        return (mod, mod.classes[name]) if mod and name in mod.classes else None


def literal(source: Source, mod: Module, node, scope=None, depth: int = 0):
    """The value of a default expression when it is a constant the source spells out, else raises."""
    if depth > 8:
        raise ValueError
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        pass
    if isinstance(node, ast.Name):
        if scope is not None and node.id in scope:
            return literal(source, mod, scope[node.id], None, depth + 1)
        found = source.lookup(mod, node.id)
        if found and not isinstance(found[1], ast.ClassDef):
            return literal(source, found[0], found[1], None, depth + 1)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        found = source.lookup(mod, node.value.id)
        if found and isinstance(found[1], ast.ClassDef):
            for stmt in found[1].body:
                if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == node.attr for t in stmt.targets
                ):
                    return literal(source, found[0], stmt.value, None, depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1:
        # a str subclass marking a default (`_DefaultDeviceMap("sequential")`) keeps its value
        return literal(source, mod, node.args[0], scope, depth + 1)
    raise ValueError


def default_entry(source, mod, node, scope=None):
    """{"default": value} when the source gives a constant, plus the expression as written."""
    entry = {"expr": ast.unparse(node)}
    try:
        entry["default"] = literal(source, mod, node, scope)
    except ValueError:
        pass
    return entry


def class_scope(cls: ast.ClassDef):
    """Names assigned unconditionally at the top of a class body (`default_optim = "adamw_torch"`)."""
    return {
        t.id: stmt.value
        for stmt in cls.body
        if isinstance(stmt, ast.Assign)
        for t in stmt.targets
        if isinstance(t, ast.Name)
    }


def dataclass_fields(source: Source, mod: Module, name: str):
    """Fields of dataclass `name` and its dataclass bases, most derived definition winning."""
    found = source.lookup(mod, name)
    if not found or not isinstance(found[1], ast.ClassDef):
        raise SystemExit(f"class {name} not found from {mod.dotted}")
    cmod, cls = found
    fields = {}
    for base in cls.bases:
        if isinstance(base, ast.Name) and source.lookup(cmod, base.id):
            bmod, bnode = source.lookup(cmod, base.id)
            if isinstance(bnode, ast.ClassDef):
                fields.update(dataclass_fields(source, bmod, base.id))
    scope = class_scope(cls)
    owner = f"{cmod.dotted}.{cls.name}"
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        key = stmt.target.id
        if key.startswith("_") or "ClassVar" in ast.unparse(stmt.annotation):
            continue
        entry = {"defined_in": owner}
        value = stmt.value
        if isinstance(value, ast.Call) and ast.unparse(value.func) in ("field", "dataclasses.field"):
            kw = {k.arg: k.value for k in value.keywords}
            if "default" in kw:
                entry.update(default_entry(source, cmod, kw["default"], scope))
            elif "default_factory" in kw:
                entry["expr"] = ast.unparse(kw["default_factory"]) + "()"
                if ast.unparse(kw["default_factory"]) in ("list", "dict"):
                    entry["default"] = [] if ast.unparse(kw["default_factory"]) == "list" else {}
            if kw.get("init") is not None and ast.literal_eval(kw["init"]) is False:
                continue
        elif value is not None:
            entry.update(default_entry(source, cmod, value, scope))
        else:
            entry["required"] = True
        fields[key] = entry
    return fields


def function_params(source: Source, mod: Module, cls_name: str, func: str):
    """Keyword parameters of `cls_name.func` (following `functools.wraps` / a plain delegation)."""
    found = source.lookup(mod, cls_name)
    if not found or not isinstance(found[1], ast.ClassDef):
        raise SystemExit(f"class {cls_name} not found from {mod.dotted}")
    cmod, cls = found
    fn = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == func), None
    )
    if fn is None or only_forwards(fn):
        # inherited, or a wrapper whose real signature is the wrapped function's
        for base in cls.bases:
            if isinstance(base, ast.Name):
                try:
                    return function_params(source, cmod, base.id, func)
                except SystemExit:
                    continue
        raise SystemExit(f"{cls_name}.{func} not found")
    args = fn.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = {}
    owner = f"{cmod.dotted}.{cls.name}.{func}"
    for a, d in zip(positional, defaults):
        if a.arg in ("self", "cls", "model"):
            continue
        params[a.arg] = {"defined_in": owner, **(default_entry(source, cmod, d) if d else {"required": True})}
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        params[a.arg] = {"defined_in": owner, **(default_entry(source, cmod, d) if d else {"required": True})}
    return params, args.kwarg is not None


def module_function_params(mod: Module, source: Source, func: str):
    """Keyword parameters of the module-level function `func`."""
    fn = next((n for n in mod.tree.body if isinstance(n, ast.FunctionDef) and n.name == func), None)
    if fn is None:
        raise SystemExit(f"{mod.dotted}.{func} not found")
    args = fn.args
    defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
    owner = f"{mod.dotted}.{func}"
    params = {
        a.arg: {"defined_in": owner, **(default_entry(source, mod, d) if d else {"required": True})}
        for a, d in zip(args.args, defaults)
    }
    return params, args.kwarg is not None


def only_forwards(fn: ast.FunctionDef) -> bool:
    """`def f(model, *args, **kwargs)`: a wrapper with no parameters of its own."""
    a = fn.args
    named = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls", "model")]
    return not named and a.vararg is not None and a.kwarg is not None


def extract():
    roots = {}
    for package, version in PINS.items():
        unpacked = fetch(package, version)
        roots[package] = unpacked
    source = Source(roots)
    calls = {}

    def add(name, package, params, var_kwargs, where):
        calls[name] = {
            "package": package,
            "version": PINS[package],
            "source": where,
            "accepts_other_kwargs": var_kwargs,
            "params": dict(sorted(params.items())),
        }

    grpo = source.module("trl.trainer.grpo_config")
    add("trl.GRPOConfig", "trl", dataclass_fields(source, grpo, "GRPOConfig"), False,
        "trl/trainer/grpo_config.py: GRPOConfig(_BaseConfig(transformers.TrainingArguments))")
    model_cfg = source.module("trl.trainer.model_config")
    add("trl.ModelConfig", "trl", dataclass_fields(source, model_cfg, "ModelConfig"), False,
        "trl/trainer/model_config.py: ModelConfig")
    lora = source.module("peft.tuners.lora.config")
    add("peft.LoraConfig", "peft", dataclass_fields(source, lora, "LoraConfig"), False,
        "peft/tuners/lora/config.py: LoraConfig(PeftConfig(PeftConfigMixin))")
    loader = source.module("unsloth.models.loader")
    params, kw = function_params(source, loader, "FastLanguageModel", "from_pretrained")
    add("unsloth.FastLanguageModel.from_pretrained", "unsloth", params, kw,
        "unsloth/models/loader.py: FastLanguageModel.from_pretrained")
    params, kw = function_params(source, loader, "FastLanguageModel", "get_peft_model")
    add("unsloth.FastLanguageModel.get_peft_model", "unsloth", params, kw,
        "unsloth/models/llama.py: FastLlamaModel.get_peft_model (FastLanguageModel's wraps it)")
    zoo = source.module("unsloth_zoo.vllm_utils")
    params, kw = module_function_params(zoo, source, "load_vllm")
    add("unsloth_zoo.vllm_utils.load_vllm", "unsloth_zoo", params, kw,
        "unsloth_zoo/vllm_utils.py: load_vllm (from_pretrained passes it the load_vllm keywords of its **kwargs)")
    serve = source.module("trl.scripts.vllm_serve")
    add("trl.vllm_serve.ScriptArguments", "trl", dataclass_fields(source, serve, "ScriptArguments"), False,
        "trl/scripts/vllm_serve.py: ScriptArguments (the flags of `trl vllm-serve`)")
    cluster = source.module("accelerate.commands.config.config_args")
    add("accelerate.ClusterConfig", "accelerate", dataclass_fields(source, cluster, "ClusterConfig"), False,
        "accelerate/commands/config/config_args.py: ClusterConfig(BaseConfig), what accelerate.yaml holds")
    questions = source.module("accelerate.commands.config.cluster")
    add("accelerate.deepspeed_config", "accelerate", subscript_keys(questions, "deepspeed_config"), False,
        "accelerate/commands/config/cluster.py: get_cluster_input, the keys of accelerate.yaml's deepspeed_config")
    add("accelerate.fsdp_config", "accelerate", subscript_keys(questions, "fsdp_config"), False,
        "accelerate/commands/config/cluster.py: get_cluster_input, the keys of accelerate.yaml's fsdp_config")
    ds_top = string_constants(source.module("deepspeed.runtime.constants"))
    ds_top.update(string_constants(source.module("deepspeed.runtime.zero.config")))
    add("deepspeed.config", "deepspeed", ds_top, False,
        "deepspeed/runtime/constants.py and zero/config.py: the top-level keys of ds_config.json")
    zero = source.module("deepspeed.runtime.zero.config")
    add("deepspeed.DeepSpeedZeroConfig", "deepspeed", pydantic_keys(source, zero, "DeepSpeedZeroConfig"), False,
        "deepspeed/runtime/zero/config.py: DeepSpeedZeroConfig, ds_config.json's zero_optimization")
    offload = source.module("deepspeed.runtime.zero.offload_config")
    keys = pydantic_keys(source, offload, "DeepSpeedZeroOffloadOptimizerConfig")
    keys.update(pydantic_keys(source, offload, "DeepSpeedZeroOffloadParamConfig"))
    add("deepspeed.DeepSpeedZeroOffloadConfig", "deepspeed", keys, False,
        "deepspeed/runtime/zero/offload_config.py: offload_optimizer / offload_param")
    return {
        "about": "Generated by tools/contract/extract.py from the pinned wheels; do not edit by hand.",
        "pins": PINS,
        "calls": calls,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the checked-in file, write nothing")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    text = json.dumps(extract(), indent=1, sort_keys=False, ensure_ascii=False) + "\n"
    if args.check:
        old = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if old != text:
            import difflib
            diff = difflib.unified_diff(old.splitlines(), text.splitlines(), "checked-in", "from the wheels", lineterm="")
            print("\n".join(list(diff)[:200]))
            sys.exit(f"{args.out}: the trainer contract drifted from the pinned wheels; run tools/contract/extract.py")
        print(f"{args.out}: matches the pinned wheels ({', '.join(f'{k} {v}' for k, v in PINS.items())})")
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(args.out)
    calls = json.loads(text)["calls"]
    n = sum(len(c["params"]) for c in calls.values())
    print(f"wrote {args.out}: {n} parameters in {len(calls)} calls")


if __name__ == "__main__":
    main()
