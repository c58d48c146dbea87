//! Why the user's run file or recipe cannot be written back: the file, the key, and what is
//! wrong with its edit (`edit_toml`, `yaml_edit`, `write_back`).

use std::path::PathBuf;

/// A tuned run that cannot be written into the file asked for. (toml_edit's errors are boxed,
/// which keeps the error under clippy's `result_large_err` size.)
#[derive(Debug, thiserror::Error)]
pub enum WriteBackError {
    /// the TOML run file cannot be parsed for editing
    #[error("{}: cannot edit: {error}", .path.display())]
    CannotEdit {
        path: PathBuf,
        error: Box<toml_edit::TomlError>,
    },
    /// `[table] key` of the TOML run file cannot be set
    #[error("{}: `[{table}] {key}`: {problem}", .path.display())]
    TomlKey {
        path: PathBuf,
        table: String,
        key: String,
        problem: EditError,
    },
    /// the recipe's top-level `key` cannot be set or removed
    #[error("{}: `{key}`: {problem}", .path.display())]
    RecipeKey {
        path: PathBuf,
        key: String,
        problem: EditError,
    },
    /// a YAML `out` asked for a run that was not read from a recipe
    #[error(
        "{}: a TRL recipe is written only into one read with --config recipe.yaml; write a .toml run file",
        .out.display()
    )]
    RecipeOnlyFromRecipe { out: PathBuf },
    /// the recipe cannot be read as TRL reads it, so no edit of it can be checked
    #[error("{}{}: cannot edit: {problem}", .path.display(), .line.map(|l| format!(":{l}")).unwrap_or_default())]
    Unreadable {
        path: PathBuf,
        line: Option<usize>,
        problem: String,
    },
    /// the edited text does not read back as it must: nothing was written
    #[error("{}: not written: the edit would {problem}; the file is left as it was: edit it by hand", .path.display())]
    Unverified { path: PathBuf, problem: String },
    /// the file changed on disk since it was read
    #[error("{}: changed on disk since grpofit read it ({what}): not written, so that change is not lost; run again to start from the new text", .path.display())]
    Stale { path: PathBuf, what: String },
}

/// Why one key's value cannot be edited in place.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// `value` as TOML writes it
    #[error("cannot write {value}: {error}")]
    NotTomlValue {
        value: String,
        error: Box<toml_edit::TomlError>,
    },
    #[error("`{table}` is not a table")]
    NotATable { table: String },
    /// a recipe's value written over more than its line (a list, a map, a block scalar)
    #[error(
        "written as a list, a map or on the lines below: only one-line values are edited; change it by hand"
    )]
    NotOneLine,
    #[error("its quoted value does not close on its line")]
    UnclosedQuote,
    #[error("its list does not close on its line")]
    UnclosedList,
    #[error(
        "the recipe is written as a flow map `{{...}}`: only block maps (`key: value` lines) are edited; change it by hand"
    )]
    FlowMap,
    #[error("the recipe is not a map of `key: value` lines")]
    NotAMap,
    #[error("written twice (again on line {line}): PyYAML keeps the last; remove one")]
    Twice { line: usize },
    #[error("the key itself carries the anchor `{anchor}`: edit it by hand or drop the anchor")]
    AnchoredKey { anchor: String },
    #[error("the key is an alias: edit it by hand")]
    AliasKey,
    #[error("written as a `? key` complex key: edit it by hand or write `key: value`")]
    ComplexKey,
    #[error("its value is the alias `*{}`: it reuses another key's value; edit it by hand or write the value", .anchor.trim_start_matches('&'))]
    Alias { anchor: String },
    #[error("holds the anchor `{anchor}`{}: edit it by hand or drop the anchor", if .users.is_empty() { String::new() } else { format!(" that {} reuse{}", .users.iter().map(|u| format!("`{u}`")).collect::<Vec<_>>().join(", "), if .users.len() == 1 { "s" } else { "" }) })]
    Anchored { anchor: String, users: Vec<String> },
    #[error("its value carries the tag `{tag}`: edit it by hand")]
    Tagged { tag: String },
    #[error("has no value on its line (`key:` alone): write `key: null` or edit it by hand")]
    NoValue,
}
