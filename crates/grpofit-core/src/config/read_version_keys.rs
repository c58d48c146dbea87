//! Notes for the keys of `[model]`, `[lora]` and `[vllm_server]` that the pinned releases'
//! calls do not take (the release ladders, as the export reads them: `export_keys`); `[grpo]`
//! has its own (`read_grpofit::version_notes`). The file still loads, read as the targeted
//! releases read it; the note says which release would not take the key.

use super::export_keys::left_out_by;
use super::tables::Tables;
use crate::contract::accepts::{CallVersions, accepts, releases_taking};
use crate::contract::{Call, Stack, Table, retired};
use crate::run::versions::{Package, Pinned};

/// The pinned releases the ladders are read at, on `stack`.
pub(super) fn call_versions(pins: &[Pinned], stack: Stack) -> CallVersions {
    let of = |p: Package| {
        pins.iter()
            .find(|x| x.package == p)
            .map_or(p.targeted(), |x| x.version)
    };
    CallVersions {
        trl: of(Package::Trl),
        unsloth: of(Package::Unsloth),
        transformers: of(Package::Transformers),
        vllm: of(Package::Vllm),
        stack,
    }
}

/// One note per key of `[model]`, `[lora]` or `[vllm_server]` the pinned release's call lacks.
pub(super) fn pinned_key_notes(t: &Tables, pins: &[Pinned]) -> Vec<String> {
    let versions = call_versions(pins, t.stack);
    let mut notes = Vec::new();
    for table in [Table::Model, Table::Lora, Table::VllmServer] {
        for key in t.keys_of(table) {
            if retired(table, key, t.stack).is_some() {
                continue;
            }
            if let Some(why) = left_out_by(table, t.stack, key, &versions) {
                let others = table
                    .call(t.stack)
                    .map_or_else(String::new, |c| taken_by(c, key, t.stack));
                notes.push(format!(
                    "`[{}] {key}`: {why} {key} (read from that release's wheel){others}; an export for it leaves the key out",
                    table.name()
                ));
            }
        }
    }
    notes
}

/// One note per retired key the file writes (`contract::RETIRED`) that the pinned release's
/// call does not take: it is read where its value goes now, and an export leaves it out. A
/// retired key the pinned release takes (trl 0.15's `vllm_max_model_len`) is that release's
/// own keyword: no note, and its export writes it.
pub(super) fn retired_notes(t: &Tables, pins: &[Pinned]) -> Vec<String> {
    let versions = call_versions(pins, t.stack);
    let mut notes = Vec::new();
    for table in Table::ALL {
        for key in t.keys_of(table) {
            let Some(r) = retired(table, key, t.stack) else {
                continue;
            };
            if table
                .call(t.stack)
                .is_some_and(|call| accepts(call, key, &versions))
            {
                continue;
            }
            notes.push(format!(
                "`[{}] {key}` is read but not exported: {}",
                table.name(),
                r.now
            ));
        }
    }
    notes
}

/// `; trl 0.14.0, 0.15.2 take it` for a key the targeted release's `call` lacks, naming the
/// modelled releases that take it, package by package (`; transformers 4.46.3 to 5.10.4 take
/// it`; empty when the targeted release takes it, or none does).
pub(super) fn taken_by(call: Call, key: &str, stack: Stack) -> String {
    if call.accepts(key) {
        return String::new();
    }
    let takers = releases_taking(call, key, stack);
    let mut parts = Vec::new();
    for package in ["trl", "transformers", "unsloth"] {
        let releases: Vec<String> = takers
            .iter()
            .filter(|(p, _)| *p == package)
            .map(|(_, r)| r.to_string())
            .collect();
        parts.push(match releases.as_slice() {
            [] => continue,
            // a long run of rungs as its ends
            [first, .., last] if releases.len() > 4 => format!("{package} {first} to {last}"),
            all => format!("{package} {}", all.join(", ")),
        });
    }
    match takers.len() {
        0 => String::new(),
        1 => format!("; {} takes it", parts.join(", ")),
        _ => format!("; {} take it", parts.join(", ")),
    }
}
