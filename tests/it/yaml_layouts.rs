//! TRL recipes in the layouts people write, read as PyYAML reads them (`yaml.safe_load`, what
//! TRL's `TrlParser` uses) and written back: every write-back is either an exact minimal edit
//! that both this reader and real PyYAML read back with the tuned values, or refused with the
//! file unchanged. The reader is cross-checked against real PyYAML over a corpus (python3 with
//! PyYAML; under CI a missing PyYAML fails the test).

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit_core::config::export::ExportContext;
use grpofit_core::config::pyyaml::safe_load;
use grpofit_core::config::pyyaml_resolve::Py;
use grpofit_core::config::write_back::text_for;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use std::process::Command;

fn grpofit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_grpofit"))
}

/// One recipe layout: the constructs combined.
#[derive(Debug, Clone)]
struct Layout {
    indent: usize,
    spaced_colon: bool,
    /// 0 LF, 1 CRLF, 2 CR
    eol: usize,
    bom: bool,
    doc_start: bool,
    doc_end: bool,
    /// 0 plain, 1 single, 2 double quotes on string values
    quotes: usize,
    comments: bool,
    /// the tuned keys written `"key":`, their numbers `"16"` (a string TRL's argparse converts)
    quoted_keys: bool,
    quoted_numbers: bool,
    /// blank lines, a nested map, a block scalar, a plain scalar over two lines, tabs
    extras: bool,
    final_eol: bool,
    /// the batch keys from a `<<: *defaults` merge
    merge: bool,
    /// the rare ones, refused: an anchor on the tuned key, a flow map, a `? key`
    anchored: bool,
    flow: bool,
    complex: bool,
}

impl Layout {
    fn refused(&self) -> bool {
        self.flow || (!self.merge && (self.anchored || self.complex))
    }

    fn eol(&self) -> &'static str {
        ["\n", "\r\n", "\r"][self.eol]
    }

    fn text(&self) -> String {
        self.render(None)
    }

    /// The recipe; with `tuned`, as a minimal edit writes the micro-batch 4 and accumulation
    /// 16 into it (`appended`: the order the added keys come in), the header aside.
    fn render(&self, tuned: Option<[&str; 2]>) -> String {
        let i = " ".repeat(self.indent);
        let c = if self.spaced_colon { " :" } else { ":" };
        let q = |s: &str| match self.quotes {
            0 => s.to_string(),
            1 => format!("'{s}'"),
            _ => format!("\"{s}\""),
        };
        let cm = |n: &str| {
            if self.comments {
                format!("  # {n}")
            } else {
                String::new()
            }
        };
        let k = |key: &str| {
            if self.quoted_keys {
                format!("\"{key}\"")
            } else {
                key.to_string()
            }
        };
        let n = |v: &str| {
            if self.quoted_numbers {
                format!("\"{v}\"")
            } else {
                v.to_string()
            }
        };
        let (batch, accum) = match tuned {
            Some(_) if !self.merge => ("4".to_string(), "16".to_string()),
            _ => (n("16"), n("4")),
        };
        let mut t = String::new();
        if self.flow {
            t.push_str(&format!("{{model_name_or_path: {}, use_vllm: true, vllm_mode: colocate, vllm_gpu_memory_utilization: 0.3, max_prompt_length: 512, max_completion_length: 4096, num_generations: 16, per_device_train_batch_size: 16, gradient_accumulation_steps: 4}}\n", q("Qwen/Qwen2.5-1.5B-Instruct")));
        } else {
            if self.doc_start {
                t.push_str("---\n");
            }
            t.push_str(&format!("{i}# a recipe\n"));
            t.push_str(&format!(
                "{i}model_name_or_path{c} {}{}\n",
                q("Qwen/Qwen2.5-1.5B-Instruct"),
                cm("the model")
            ));
            if self.extras {
                t.push_str(&format!("\n{i}model_init_kwargs{c}\n{i}  attn_implementation: sdpa\n{i}system_prompt{c} |\n{i}  think first\n{i}  then answer\n{i}hub_model_id{c} my\n{i}  model\n\n"));
            }
            t.push_str(&format!("{i}torch_dtype{c} {}\n", q("bfloat16")));
            t.push_str(&format!(
                "{i}use_vllm{c} true\n{i}vllm_mode{c} {}\n",
                q("colocate")
            ));
            t.push_str(&format!(
                "{i}vllm_gpu_memory_utilization{c} 0.3{}\n",
                cm("KV")
            ));
            t.push_str(&format!("{i}learning_rate{c} 2.0e-05\n{i}max_prompt_length{c} 512\n{i}max_completion_length{c} 4096\n{i}num_generations{c} 16\n"));
            // PyYAML reads a tab only inside a comment (or a quoted or block scalar)
            let per_gpu = if self.extras { "per\tGPU" } else { "per GPU" };
            if self.merge {
                t.push_str(&format!("{i}defaults{c} &defaults\n{i}  per_device_train_batch_size: 16\n{i}  gradient_accumulation_steps: 4\n{i}<<: *defaults\n"));
            } else if self.anchored {
                t.push_str(&format!("{i}{}{c} &bs {batch}{}\n{i}per_device_eval_batch_size{c} *bs\n{i}{}{c} {accum}\n", k("per_device_train_batch_size"), cm("per GPU"), k("gradient_accumulation_steps")));
            } else if self.complex {
                t.push_str(&format!(
                    "{i}? per_device_train_batch_size\n{i}: {batch}\n{i}gradient_accumulation_steps{c} {accum}\n"
                ));
            } else {
                t.push_str(&format!(
                    "{i}{}{c} {batch}{}\n{i}{}{c}   {accum}\n",
                    k("per_device_train_batch_size"),
                    cm(per_gpu),
                    k("gradient_accumulation_steps")
                ));
            }
            t.push_str(&format!("{i}reward_funcs{c}\n{i}- accuracy\n{i}- format\n"));
            let added = match tuned {
                Some(order) if self.merge => order
                    .iter()
                    .map(|key| {
                        let v = if key.starts_with("per_device") { 4 } else { 16 };
                        format!("{i}{key}: {v}\n")
                    })
                    .collect(),
                _ => String::new(),
            };
            if self.doc_end {
                t.push_str(&format!("{added}...\n# after the end\n"));
            } else if self.final_eol || added.is_empty() {
                t.push_str(&added);
            } else {
                // the edit ends the last line, then adds its keys
                t.push_str(&format!("\u{1}{added}"));
            }
        }
        if !self.final_eol {
            match t.find('\u{1}') {
                Some(at) => t.remove(at),
                None => t.pop().unwrap_or_default(),
            };
        }
        let t = match self.eol {
            0 => t,
            1 => t.replace('\n', "\r\n"),
            _ => t.replace('\n', "\r"),
        };
        if self.bom { format!("\u{feff}{t}") } else { t }
    }
}

fn layout() -> impl Strategy<Value = Layout> {
    (
        (0usize..3, any::<bool>(), 0usize..3, any::<bool>()),
        (any::<bool>(), any::<bool>(), 0usize..3, any::<bool>()),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        (0usize..8, 0usize..12),
    )
        .prop_map(
            |((ind, sc, eol, bom), (ds, de, quotes, comments), (qk, qn, extras, fe), (m, rare))| {
                Layout {
                    indent: ind * 2,
                    spaced_colon: sc,
                    eol,
                    bom,
                    doc_start: ds,
                    doc_end: de,
                    quotes,
                    comments,
                    quoted_keys: qk,
                    quoted_numbers: qn,
                    extras,
                    final_eol: fe,
                    merge: m == 0,
                    anchored: rare == 0,
                    flow: rare == 1,
                    complex: rare == 2,
                }
            },
        )
}

/// The tuned run written back into `text` (micro-batch 4, accumulation 16: the same batch):
/// the new text, or the refusal's message.
fn tuned(text: &str) -> (Result<String, String>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recipe.yaml");
    std::fs::write(&path, text).unwrap();
    let file =
        grpofit_core::config::load(&path, &grpofit_core::resolve::Offline::from_env()).unwrap();
    let before = file.run.micro_batch;
    let mut run = file.run.clone();
    run.micro_batch = 4;
    run.grad_accum = 16;
    let ctx = ExportContext {
        gpu: "test GPU",
        gpu_memory: None,
        model_config: None,
        lock_effective_batch: true,
        estimate: None,
        time: None,
    };
    let mut notes = Vec::new();
    let out = text_for(&path, file.source.as_ref(), &run, &ctx, &mut notes);
    (out.map_err(|e| e.to_string()), before)
}

fn int(v: &Py, key: &str) -> Option<i64> {
    match v.get(key) {
        Some(Py::Int(i)) => Some(*i),
        _ => None,
    }
}

/// The values of `texts` as real PyYAML reads them (TRL's way: `open()` then
/// `yaml.safe_load`), tagged; `None` when python3 or PyYAML is missing outside CI.
fn pyyaml(texts: &[String]) -> Option<Vec<serde_json::Value>> {
    const SCRIPT: &str = r#"
import sys, json, datetime, tempfile, os
import yaml
def t(v):
    if v is None: return None
    if isinstance(v, bool): return {"bool": v}
    if isinstance(v, int): return {"int": str(v)}
    if isinstance(v, float): return {"float": repr(v)}
    if isinstance(v, str): return {"str": v}
    if isinstance(v, (datetime.date, datetime.datetime)): return {"ts": ""}
    if isinstance(v, list): return {"seq": [t(x) for x in v]}
    if isinstance(v, dict): return {"map": [[t(k), t(x)] for k, x in v.items()]}
    return {"other": repr(v)}
out = []
for text in json.load(sys.stdin):
    fd, p = tempfile.mkstemp(suffix=".yaml")
    os.write(fd, text.encode("utf-8")); os.close(fd)
    try:
        with open(p, encoding="utf-8") as f:
            out.append({"ok": t(yaml.safe_load(f))})
    except Exception as e:
        out.append({"error": str(e).splitlines()[0]})
    os.remove(p)
print(json.dumps(out))
"#;
    let ci = std::env::var_os("CI").is_some();
    let spawned = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) if !ci => {
            eprintln!("python3 not found ({e}): the PyYAML cross-check is skipped");
            return None;
        }
        Err(e) => panic!("CI: python3 is needed for the PyYAML cross-check: {e}"),
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(texts).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        assert!(!ci, "CI: PyYAML is needed (.ci/run installs it): {err}");
        eprintln!("PyYAML not available ({err}): the cross-check is skipped");
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// A tagged PyYAML value as the reader's `Py` (timestamps compared by kind only).
fn from_tagged(v: &serde_json::Value) -> Py {
    let Some(obj) = v.as_object() else {
        return Py::None;
    };
    let (tag, inner) = obj.iter().next().unwrap();
    match tag.as_str() {
        "bool" => Py::Bool(inner.as_bool().unwrap()),
        "int" => inner
            .as_str()
            .unwrap()
            .parse()
            .map_or(Py::Str(format!("bigint {inner}")), Py::Int),
        "float" => Py::Float(inner.as_str().unwrap().parse().unwrap()),
        "str" => Py::Str(inner.as_str().unwrap().into()),
        "ts" => Py::Timestamp(String::new()),
        "seq" => Py::Seq(inner.as_array().unwrap().iter().map(from_tagged).collect()),
        "map" => Py::Map(
            inner
                .as_array()
                .unwrap()
                .iter()
                .map(|kv| (from_tagged(&kv[0]), from_tagged(&kv[1])))
                .collect(),
        ),
        other => Py::Str(format!("{other}: {inner}")),
    }
}

fn without_timestamps(v: Py) -> Py {
    match v {
        Py::Timestamp(_) => Py::Timestamp(String::new()),
        Py::Seq(items) => Py::Seq(items.into_iter().map(without_timestamps).collect()),
        Py::Map(e) => Py::Map(
            e.into_iter()
                .map(|(k, v)| (without_timestamps(k), without_timestamps(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Each text read by this reader and by real PyYAML: both refuse it, or both give the same.
fn agree(texts: &[String]) -> Result<(), String> {
    let Some(theirs) = pyyaml(texts) else {
        return Ok(());
    };
    for (text, theirs) in texts.iter().zip(&theirs) {
        let ours = safe_load(text);
        match (ours, theirs.get("ok")) {
            (Ok(ours), Some(t)) => {
                let t = from_tagged(t);
                if !without_timestamps(ours.clone()).same(&t) {
                    return Err(format!("{text:?}: ours {ours:?}, PyYAML {t:?}"));
                }
            }
            (Err(_), None) => {}
            (ours, _) => return Err(format!("{text:?}: ours {ours:?}, PyYAML {theirs}")),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(28), ..ProptestConfig::default() })]

    /// Every layout comes back as an exact minimal edit both readers read with the tuned
    /// values, or refused (the refused ones are the rare constructs, named).
    #[test]
    fn every_layout_is_edited_exactly_or_refused(l in layout()) {
        let text = l.text();
        let (out, before) = tuned(&text);
        prop_assert_eq!(before, 16, "the reader gives PyYAML's micro-batch");
        let out = match out {
            Err(e) => {
                prop_assert!(l.refused(), "{:?} refused: {}\n{:?}", l, e, text);
                let named = ["flow map", "anchor `&bs`", "complex key"];
                prop_assert!(named.iter().any(|n| e.contains(n)), "{}", e);
                return Ok(());
            }
            Ok(out) => out,
        };
        prop_assert!(!l.refused(), "{:?} not refused:\n{:?}", l, out);
        let back = safe_load(&out).unwrap();
        prop_assert_eq!(int(&back, "per_device_train_batch_size"), Some(4));
        prop_assert_eq!(int(&back, "gradient_accumulation_steps"), Some(16));
        let old = safe_load(&text).unwrap();
        if let (Py::Map(o), Py::Map(_)) = (&old, &back) {
            for (k, v) in o {
                let Py::Str(k) = k else { continue };
                if k != "per_device_train_batch_size" && k != "gradient_accumulation_steps" {
                    prop_assert!(back.get(k).is_some_and(|b| b.same(v)), "{} changed", k);
                }
            }
        }
        // an exact minimal edit: the header line, then the text with only the values changed
        // (or the keys added at the end of the document)
        let eol = l.eol();
        let body = out.trim_start_matches('\u{feff}');
        let (header, rest) = body.split_once(eol).unwrap();
        prop_assert!(header.starts_with("# tuned by grpofit on "), "{}", header);
        let orders = [
            ["gradient_accumulation_steps", "per_device_train_batch_size"],
            ["per_device_train_batch_size", "gradient_accumulation_steps"],
        ];
        prop_assert!(
            orders.iter().any(|o| l.render(Some(*o)).trim_start_matches('\u{feff}') == rest),
            "{:?}\n{:?}\nnot\n{:?}",
            l,
            out,
            l.render(Some(orders[0]))
        );
        // the bytes outside the edit: BOM, line ends of the file's kind, the lines kept
        prop_assert_eq!(out.starts_with('\u{feff}'), l.bom);
        let ends = body.matches(['\n', '\r']).count();
        let per = if eol == "\r\n" { 2 } else { 1 };
        prop_assert_eq!(body.matches(eol).count() * per, ends, "{:?}", out);
        let lines: Vec<&str> = body.split(eol).collect();
        let old_lines: Vec<&str> = text.trim_start_matches('\u{feff}').split(eol).collect();
        let kept = old_lines.iter().filter(|x| lines.contains(x)).count();
        prop_assert!(old_lines.len() - kept <= 2, "{:?}", out);
        // the estimate reads it back too
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("back.yaml");
        std::fs::write(&p, &out).unwrap();
        let file = grpofit_core::config::load(&p, &grpofit_core::resolve::Offline::from_env()).unwrap();
        prop_assert_eq!(file.run.micro_batch, 4);
        prop_assert_eq!(file.run.grad_accum, 16);
        // and real PyYAML, opening the file as TRL does
        if let Some(theirs) = pyyaml(std::slice::from_ref(&out)) {
            let t = from_tagged(&theirs[0]["ok"]);
            prop_assert_eq!(int(&t, "per_device_train_batch_size"), Some(4), "{}", theirs[0]);
            prop_assert!(without_timestamps(back).same(&t));
        }
    }
}

/// The reader against real PyYAML: YAML 1.1's scalars, merges, anchors, documents, errors.
#[test]
fn the_reader_agrees_with_pyyaml() {
    let mut corpus: Vec<String> = [
        "a: 1e-5\nb: 1.0e-5\nc: 1.0e5\nd: yes\ne: 0o17\nf: 017\ng: 1_000\nh: 08\ni: 1:30\nj: .5\nk: 5.\nl: +.inf\nn: 0x1F\no: ~\np: Null\nq: NO\nr: y\ns: 1__0.0_1\nt: -0b101\nu: 190:20:30.15\nv: on\nw: 2024-01-01\nx: '1'\ny: \"yes\"\nz: !!str 5\n",
        "d: &d {a: 1, b: 2}\ne: &e {a: 3, c: 4}\nf:\n  <<: [*d, *e]\n  b: 9\n",
        "defaults: &defaults\n  per_device_train_batch_size: 4\n  gradient_accumulation_steps: 4\n<<: *defaults\nper_device_train_batch_size: 8\n",
        "<<: {a: 1}\na: 2\n<<: {b: 3}\n",
        "a: &x 1\nb: *x\nc: [*x, *x]\n",
        "a: &x 1\nb: &x 2\n",
        "a: 1\n---\nb: 2\n",
        "---\na: 1\n...\n# end\n",
        "\u{feff}a: 1\r\nb: 2\r\n",
        "a: 1\rb: 2\r",
        "  a: 1\n  b: two words # c\n",
        "a : 1\n? b\n: 2\n",
        "{a: 1, b: [x, y]}\n",
        "a: !!float 1\nb: !!int '7'\n",
        "a: !foo 1\n",
        "a: {<<: 1}\n",
        "a: |\n  x\n  y\nb: >\n  p\n  q\n",
        "a: 'it''s'\nb: \"tab\\tnew\\n\"\n",
        "yes: 1\n",
        "a:\nb: null\n",
        "a: 0.30\nb: -0.0\nc: 1e3\nd: 1.5e+3\ne: 6.0e-07\n",
        "a: 4\t\n",
        "a: 4 # c\td\nb: \"x\ty\"\nc: |\n  x\ty\n",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // and the generator's layouts, as read and as written back
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(
        ProptestConfig::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    for _ in 0..40 {
        let l = layout().new_tree(&mut runner).unwrap().current();
        let text = l.text();
        if let (Ok(out), _) = tuned(&text) {
            corpus.push(out);
        }
        corpus.push(text);
    }
    agree(&corpus).unwrap();
}

/// The done-when, from the binary: `fit -o same.yaml --force` on a recipe with `<<: *defaults`
/// reads PyYAML's micro-batch and writes an edit PyYAML reads; on an anchored tuned key it
/// exits 2, names the anchor and the key reusing it, and leaves the file as it was.
#[test]
fn fit_o_same_yaml_edits_exactly_or_refuses_leaving_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let base = Layout {
        indent: 0,
        spaced_colon: false,
        eol: 1,
        bom: true,
        doc_start: true,
        doc_end: true,
        quotes: 0,
        comments: true,
        quoted_keys: false,
        quoted_numbers: false,
        extras: true,
        final_eol: true,
        merge: true,
        anchored: false,
        flow: false,
        complex: false,
    };
    let fit = |l: &Layout| {
        let path = dir.path().join("same.yaml");
        let text = l.text();
        std::fs::write(&path, &text).unwrap();
        let r = grpofit()
            .args(["fit", "--config"])
            .arg(&path)
            .args(["--gpu-mem", "24GiB", "-o"])
            .arg(&path)
            .arg("--force")
            .output()
            .unwrap();
        let err =
            String::from_utf8_lossy(&r.stderr).to_string() + &String::from_utf8_lossy(&r.stdout);
        (
            text,
            std::fs::read_to_string(&path).unwrap(),
            r.status.code(),
            err,
        )
    };
    let (text, out, code, err) = fit(&base);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("effective batch 64 kept"), "{err}");
    let back = safe_load(&out).unwrap();
    let micro = int(&back, "per_device_train_batch_size").unwrap();
    assert!(micro < 16, "{out}");
    assert!(out.ends_with("...\r\n# after the end\r\n"), "{out:?}");
    assert_eq!(out.matches('\n').count(), out.matches("\r\n").count());
    assert!(out.starts_with("\u{feff}# tuned by grpofit on "));
    assert!(
        out.contains(
            &text
                .replace("...\r\n# after the end\r\n", "")
                .replace('\u{feff}', "")[..40]
        )
    );
    if let Some(theirs) = pyyaml(std::slice::from_ref(&out)) {
        assert_eq!(
            int(
                &from_tagged(&theirs[0]["ok"]),
                "per_device_train_batch_size"
            ),
            Some(micro)
        );
    }
    let anchored = Layout {
        merge: false,
        anchored: true,
        ..base
    };
    let (text, out, code, err) = fit(&anchored);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(out, text, "the file is left as it was");
    assert!(
        err.contains("holds the anchor `&bs` that `per_device_eval_batch_size` reuses"),
        "{err}"
    );
}

/// The issue's example: PyYAML resolves 4 × 4 from the merge, where the old reader read 8 × 1.
#[test]
fn a_merge_key_gives_pyyamls_micro_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("merge.yaml");
    std::fs::write(&path, "defaults: &defaults\n  per_device_train_batch_size: 4\n  gradient_accumulation_steps: 4\nmodel_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\n<<: *defaults\nnum_generations: 8\nlearning_rate: 1e-5\n").unwrap();
    let r = grpofit()
        .args(["estimate", "--json", "--gpu-mem", "80GiB", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["running_micro_batch"], 4, "{v}");
    assert_eq!(v["effective_batch"], 16, "{v}");
}

/// A tuned float as the write-back writes it (`pyyaml_resolve::float_text`, what
/// `yaml_edit::scalar` writes for `fit -o` and `--export-dir`'s tuned.yaml) is a float to real
/// PyYAML and to the reader, small and large alike: Rust's Debug form `1e-5` is a *string* to
/// PyYAML 6.0, whose float resolver needs a dot and a signed exponent (`1.0e-5`).
#[test]
fn tuned_floats_are_floats_to_pyyaml() {
    use grpofit_core::config::pyyaml_resolve::float_text;
    let values = [
        1e-5, 2.5e-7, 0.0001, 1e-4, 0.45, 0.9, 1.0, 3e20, 1.5e16, 123456.789,
    ];
    let texts: Vec<String> = values
        .iter()
        .map(|x| format!("lr: {}\n", float_text(*x)))
        .collect();
    for (x, text) in values.iter().zip(&texts) {
        let ours = safe_load(text).unwrap();
        let Py::Map(pairs) = ours else {
            panic!("{text}: {ours:?}")
        };
        assert!(
            matches!(pairs[0].1, Py::Float(f) if f == *x),
            "{text}: {pairs:?}"
        );
    }
    if let Some(theirs) = pyyaml(&texts) {
        for ((x, text), got) in values.iter().zip(&texts).zip(theirs) {
            let float = got["ok"]["map"][0][1]["float"].as_str();
            let parsed = float.and_then(|f| f.parse::<f64>().ok());
            assert_eq!(parsed, Some(*x), "PyYAML read {text:?} as {got}");
        }
    }
}
