//! `grpofit env`: the trainer versions of the active Python environment, as `versions_env`
//! reads them, each against the range grpofit models.

use crate::versions_env::detect;
use grpofit_core::run::versions::Package;

/// `grpofit env`: where the Python environment is and which trainer versions it holds, each
/// against the range grpofit models. Exit 0.
pub(crate) fn show_env(json: bool) -> Result<u8, crate::output::Failure> {
    use crate::output::{FITS, emit, json_text, unwritten};
    use std::io::Write;
    let env = detect();
    let rows: Vec<serde_json::Value> = Package::ALL
        .iter()
        .map(|&p| {
            let found = env.installed.found.iter().find(|(q, _, _)| *q == p);
            let modelled = found.map(|(_, v, _)| {
                grpofit_core::run::versions::Release::parse(v).is_some_and(|r| p.models(r))
            });
            serde_json::json!({
                "package": p,
                "version": found.map(|(_, v, _)| v),
                "metadata": found.map(|(_, _, path)| path),
                "modelled": modelled,
                "modelled_range": p.range_text(),
                "default": p.targeted().to_string(),
            })
        })
        .collect();
    if json {
        let v = serde_json::json!({
            "from": env.from,
            "prefix": env.prefix,
            "site_packages": env.site_packages,
            "packages": rows,
        });
        let text = json_text(&v)?;
        emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(FITS))?;
        return Ok(FITS);
    }
    let mut text = match &env.prefix {
        Some(p) => format!("python environment: {} ({})\n", p.display(), env.from),
        None => "python environment: none found ($VIRTUAL_ENV, $CONDA_PREFIX unset; no python3 on PATH)\n".to_string(),
    };
    for d in &env.site_packages {
        text.push_str(&format!("site-packages: {}\n", d.display()));
    }
    for (p, row) in Package::ALL.iter().zip(&rows) {
        let line = match (row["version"].as_str(), row["metadata"].as_str()) {
            (Some(v), Some(path)) if row["modelled"] == serde_json::json!(true) => {
                format!("{} {v} ({path})", p.name())
            }
            (Some(v), Some(path)) => format!(
                "{} {v} ({path}): outside the modelled range {}; the estimate refuses it unless [grpofit] {} says otherwise",
                p.name(),
                p.range_text(),
                p.key()
            ),
            _ => format!(
                "{}: not installed; the estimate uses {} unless [grpofit] {} says otherwise",
                p.name(),
                p.targeted(),
                p.key()
            ),
        };
        text.push_str(&line);
        text.push('\n');
    }
    emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(FITS))?;
    Ok(FITS)
}
