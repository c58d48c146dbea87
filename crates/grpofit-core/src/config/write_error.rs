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
}
