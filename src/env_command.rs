//! `grpofit env`: the trainer versions of the active Python environment, as `versions_env`
//! reads them, each against the range grpofit models, and the versions an estimate takes from
//! them (with `--trl-version` and the like over them): those they imply, and the
//! requirements a combination breaks (`run::implied`).

use crate::cli::Source;
use crate::versions_env::detect;
use grpofit_core::contract::Stack;
use grpofit_core::run::implied;
use grpofit_core::run::versions::{Origin, Package, Release};

/// `grpofit env`: where the Python environment is, which trainer versions it holds (each
/// against the range grpofit models) and what an estimate on the unsloth stack (the one that
/// runs all four) is made with. Exit 0, a refused version included (said as a warning).
pub(crate) fn show_env(source: &Source, json: bool) -> Result<u8, crate::output::Failure> {
    use crate::output::{FITS, emit, json_text, unwritten};
    use std::io::Write;
    let env = detect();
    let given: Vec<(Package, String, Origin)> = source
        .versions
        .pins()
        .into_iter()
        .map(|(p, v)| (p, v, Origin::CommandLine(p.flag())))
        .collect();
    // a refused version is said, not fatal: `env` shows what is installed whatever it is
    let resolved = implied::resolve(&given, &env.installed, Stack::Unsloth).unwrap_or_else(|r| {
        implied::Resolved {
            pins: Vec::new(),
            warnings: vec![format!(
                "{} {} ({}): {}; an estimate refuses it unless {} or [grpofit] {} says otherwise",
                r.package.name(),
                r.text,
                r.origin,
                r.reason,
                r.package.flag(),
                r.package.key()
            )],
        }
    });
    let pin_of = |p: Package| resolved.pins.iter().find(|x| x.package == p);
    let rows: Vec<serde_json::Value> = Package::ALL
        .iter()
        .map(|&p| {
            let pin = pin_of(p);
            let found = env.installed.found.iter().find(|(q, _, _)| *q == p);
            let modelled = found.map(|(_, v, _)| Release::parse(v).is_some_and(|r| p.models(r)));
            serde_json::json!({
                "package": p,
                "version": found.map(|(_, v, _)| v),
                "metadata": found.map(|(_, _, path)| path),
                "modelled": modelled,
                "modelled_range": p.range_text(),
                "default": p.targeted().to_string(),
                "estimated_with": pin.map(|x| serde_json::json!({"version": x.version, "origin": x.origin})),
            })
        })
        .collect();
    if json {
        let v = serde_json::json!({
            "from": env.from,
            "prefix": env.prefix,
            "site_packages": env.site_packages,
            "packages": rows,
            "warnings": resolved.warnings,
        });
        let text = json_text(&v)?;
        emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(FITS))?;
        return Ok(FITS);
    }
    let mut text = where_text(&env);
    for (p, row) in Package::ALL.iter().zip(&rows) {
        let line = match (row["version"].as_str(), row["metadata"].as_str()) {
            (Some(v), Some(path)) if row["modelled"] == serde_json::json!(true) => {
                format!("{} {v} ({path})", p.name())
            }
            (Some(v), Some(path)) => format!(
                "{} {v} ({path}): outside the modelled range {}",
                p.name(),
                p.range_text(),
            ),
            _ => match pin_of(*p) {
                Some(pin) => format!(
                    "{}: not installed; an estimate uses {} ({}) unless [grpofit] {} or {} says otherwise",
                    p.name(),
                    pin.version,
                    pin.origin,
                    p.key(),
                    p.flag()
                ),
                None => format!("{}: not installed", p.name()),
            },
        };
        text.push_str(&line);
        text.push('\n');
    }
    for w in &resolved.warnings {
        text.push_str(&format!("warning: {w}\n"));
    }
    emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(FITS))?;
    Ok(FITS)
}

/// Where the environment is, and its site-packages folders (or that it holds none).
fn where_text(env: &crate::versions_env::Environment) -> String {
    let mut text = match &env.prefix {
        Some(p) => format!("python environment: {} ({})\n", p.display(), env.from),
        None => "python environment: none found ($VIRTUAL_ENV, $CONDA_PREFIX unset; no python3 on PATH)\n".to_string(),
    };
    for d in &env.site_packages {
        text.push_str(&format!("site-packages: {}\n", d.display()));
    }
    // a $VIRTUAL_ENV or $CONDA_PREFIX that holds no Python: every package would read as not
    // installed, with no word of why
    if let (Some(p), true) = (&env.prefix, env.site_packages.is_empty()) {
        text.push_str(&format!(
            "site-packages: none found under {} (lib/python3.*/site-packages): is it a Python environment?\n",
            p.display()
        ));
    }
    text
}
