//! Which keys an export leaves out for the pinned releases: a keyword the pinned release's
//! call does not take would stop it at start-up (`TypeError: ... got an unexpected keyword
//! argument`, or `vllm serve: unrecognized arguments`). The ladders say which each takes:
//! `[grpo]` TRL's `GRPOConfig` (`contract::ladder`), the unsloth stack's `[model]` and `[lora]`
//! `FastLanguageModel.from_pretrained` / `get_peft_model` (`contract::unsloth_ladder`),
//! `[vllm_server]` the flags of that TRL's `trl vllm-serve` (`contract::trl_serve_ladder`),
//! which it hands to vLLM's `EngineArgs` under the same names (`contract::vllm_ladder`).

use super::tables::{forwarded_to, own_keys};
use crate::contract::accepts::{CallVersions, accepts, engine_accepts};
use crate::contract::{Call, RETIRED, Table, trl_serve_ladder};
use crate::run::Stack;

/// Why `key` of `table` is left out for the pinned releases, as the header's line begins
/// (`trl 0.15.2's GRPOConfig takes no`); None when the pinned call takes it.
pub(super) fn left_out_by(
    table: Table,
    stack: Stack,
    key: &str,
    v: &CallVersions,
) -> Option<String> {
    if own_keys(table).contains(&key) {
        return None;
    }
    let call = table.call(stack)?;
    if !takes(call, key, v) {
        return Some(match (table, stack) {
            (Table::Grpo, _) => format!("trl {}'s GRPOConfig takes no", v.trl),
            (Table::Model, Stack::Unsloth) => format!(
                "unsloth {}'s FastLanguageModel.from_pretrained takes no",
                v.unsloth
            ),
            (Table::Lora, Stack::Unsloth) => format!(
                "unsloth {}'s FastLanguageModel.get_peft_model takes no",
                v.unsloth
            ),
            (Table::VllmServer, _) if !trl_serve_ladder::has_serve(v.trl) => format!(
                "trl {} has no `trl vllm-serve` (TRL 0.16 brought it), so none of its flags:",
                v.trl
            ),
            (Table::VllmServer, _) => format!("trl {}'s `trl vllm-serve` takes no", v.trl),
            _ => format!("{} takes no", call.name()),
        });
    }
    if table == Table::VllmServer && !engine_accepts(key, v) {
        return Some(format!(
            "vllm {}.{}'s EngineArgs (what `trl vllm-serve` passes its flags to) takes no",
            v.vllm.major, v.vllm.minor
        ));
    }
    None
}

/// The name the pinned release's call takes for what `[table] key` holds now, when it lacks
/// `key`: a retired key (`contract::RETIRED`) of the same table that moved to `key` and that
/// the pinned release takes (trl 0.15.2 to 0.17's `vllm_max_model_len` for
/// `vllm_max_model_length`).
pub(super) fn older_name(
    table: Table,
    stack: Stack,
    key: &str,
    v: &CallVersions,
) -> Option<&'static str> {
    let call = table.call(stack)?;
    RETIRED
        .iter()
        .filter(|r| r.table == table && r.moved_to == Some((table, key)))
        .filter(|r| r.stack.is_none_or(|s| s == stack))
        .find(|r| accepts(call, r.key, v))
        .map(|r| r.key)
}

/// The header's lines for the keys left out, one per reason, in the order met.
pub(super) fn header_lines(left_out: &[(String, &str)]) -> Vec<String> {
    let mut reasons: Vec<&str> = Vec::new();
    for (why, _) in left_out {
        if !reasons.contains(&why.as_str()) {
            reasons.push(why);
        }
    }
    reasons
        .into_iter()
        .map(|why| {
            let keys: Vec<&str> = left_out
                .iter()
                .filter(|(w, _)| w == why)
                .map(|(_, k)| *k)
                .collect();
            format!("# not written: {why} {}", keys.join(", "))
        })
        .collect()
}

/// Whether `call` takes `key`, itself or through the call its `**kwargs` go to (Unsloth's
/// `from_pretrained` hands `load_vllm` its `max_num_seqs`: `tables::forwarded_to`), as the
/// loader reads the key.
pub(super) fn takes(call: Call, key: &str, v: &CallVersions) -> bool {
    accepts(call, key, v) || forwarded_to(call).is_some_and(|to| accepts(to, key, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::release::Release;

    fn at(trl: (u32, u32, u32), unsloth: (u32, u32, u32), vllm: (u32, u32)) -> CallVersions {
        CallVersions {
            trl: Release::new(trl.0, trl.1, trl.2),
            unsloth: Release::new(unsloth.0, unsloth.1, unsloth.2),
            transformers: Release::new(5, 17, 0),
            vllm: Release::new(vllm.0, vllm.1, 0),
            stack: Stack::Unsloth,
        }
    }

    #[test]
    fn each_table_asks_its_pinned_call() {
        let old = at((0, 16, 1), (2025, 2, 4), (0, 7));
        let new = at((1, 15, 0), (2026, 10, 9), (0, 31));
        let u = Stack::Unsloth;
        let why = |t, k, v| left_out_by(t, u, k, v);
        assert_eq!(
            why(Table::Model, "load_in_8bit", &old).as_deref(),
            Some("unsloth 2025.2.4's FastLanguageModel.from_pretrained takes no")
        );
        assert_eq!(why(Table::Model, "load_in_8bit", &new), None);
        assert_eq!(why(Table::Model, "max_seq_length", &old), None);
        assert!(why(Table::Grpo, "vllm_mode", &old).is_some());
        assert!(why(Table::VllmServer, "data_parallel_size", &old).is_some());
        assert_eq!(why(Table::VllmServer, "gpus", &old), None);
        assert_eq!(why(Table::VllmServer, "data_parallel_size", &new), None);
        // trl 0.17's vllm-serve has the flag, vLLM 0.7's EngineArgs not
        let mixed = at((0, 17, 0), (2025, 2, 4), (0, 7));
        assert!(
            why(Table::VllmServer, "data_parallel_size", &mixed)
                .is_some_and(|w| w.starts_with("vllm 0.7's EngineArgs"))
        );
        let lines = header_lines(&[
            ("a takes no".into(), "x"),
            ("b takes no".into(), "y"),
            ("a takes no".into(), "z"),
        ]);
        assert_eq!(
            lines,
            [
                "# not written: a takes no x, z",
                "# not written: b takes no y"
            ]
        );
    }

    /// `RunConfig::pinned_release_takes` (what the levers ask) refuses exactly the keys the
    /// export leaves out.
    #[test]
    fn the_levers_question_agrees_with_the_export() {
        use crate::run::knobs::Knob;
        use crate::run::{RunConfig, VllmVersion};
        let arch = crate::arch::catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .map(|m| m.arch)
            .expect("in the catalog");
        let mut refused = 0;
        for stack in [Stack::Unsloth, Stack::Trl] {
            for (trl, unsloth, vllm) in [
                ((0, 14, 0), (2025, 2, 4), (0, 7)),
                ((0, 16, 1), (2025, 3, 19), (0, 8)),
                ((1, 15, 0), (2026, 10, 9), (0, 31)),
            ] {
                let mut run = RunConfig::example(arch.clone());
                run.switch_stack(stack);
                let v = at(trl, unsloth, vllm);
                run.versions.trl = v.trl;
                run.versions.unsloth = v.unsloth;
                run.vllm_version = VllmVersion {
                    major: vllm.0,
                    minor: vllm.1,
                };
                let mut keys: Vec<(Table, &str)> = Knob::ALL.iter().map(|k| k.key(stack)).collect();
                keys.extend([
                    (Table::Model, "load_in_8bit"),
                    (Table::Model, "load_in_fp8"),
                    (Table::Grpo, "vllm_mode"),
                    (Table::VllmServer, "data_parallel_size"),
                    (Table::VllmServer, "gpus"),
                ]);
                for (table, key) in keys {
                    let takes = run.pinned_release_takes((table, key));
                    let left_out = left_out_by(table, stack, key, &run.call_versions());
                    assert_eq!(takes, left_out.is_none(), "{stack} {table:?} {key}");
                    refused += usize::from(!takes);
                }
            }
        }
        assert!(refused > 0);
    }
}
