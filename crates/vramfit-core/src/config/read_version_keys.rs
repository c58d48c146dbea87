//! Notes for the keys of `[model]`, `[lora]` and `[vllm_server]` that the pinned releases'
//! calls do not take (the release ladders, as the export reads them: `export_keys`); `[grpo]`
//! has its own (`read_vramfit::version_notes`). The file still loads, read as the targeted
//! releases read it; the note says which release would not take the key.

use super::export_keys::left_out_by;
use super::tables::Tables;
use crate::contract::accepts::CallVersions;
use crate::contract::{Table, retired};
use crate::run::versions::{Package, Pinned};

/// The pinned releases the ladders are read at.
fn call_versions(pins: &[Pinned]) -> CallVersions {
    let of = |p: Package| {
        pins.iter()
            .find(|x| x.package == p)
            .map_or(p.targeted(), |x| x.version)
    };
    CallVersions {
        trl: of(Package::Trl),
        unsloth: of(Package::Unsloth),
        vllm: of(Package::Vllm),
    }
}

/// One note per key of `[model]`, `[lora]` or `[vllm_server]` the pinned release's call lacks.
pub(super) fn pinned_key_notes(t: &Tables, pins: &[Pinned]) -> Vec<String> {
    let versions = call_versions(pins);
    let mut notes = Vec::new();
    for table in [Table::Model, Table::Lora, Table::VllmServer] {
        for key in t.keys_of(table) {
            if retired(table, key, t.stack).is_some() {
                continue;
            }
            if let Some(why) = left_out_by(table, t.stack, key, &versions) {
                notes.push(format!(
                    "`[{}] {key}`: {why} {key} (read from that release's wheel); an export for it leaves the key out",
                    table.name()
                ));
            }
        }
    }
    notes
}
