//! `fit --fastest`: the fastest run that fits, against the nearest fit (the search is the
//! core's `fit::fastest`).

use crate::cli::Source;
use crate::inputs::{Inputs, resolve};
use crate::output::*;
use grpofit_core::config::RunFile;
use grpofit_core::fastest::{Fastest, Timing, fastest, fastest_in_place};
use grpofit_core::hardware::GpuSpeed;
use grpofit_core::memory::estimate::{Estimator, GpuBudget};
use grpofit_core::time;
use grpofit_core::units::format_size;
use std::io::Write;

pub(crate) fn run_fastest(
    source: &Source,
    headroom: f64,
    output: Option<&std::path::Path>,
    force: bool,
    json: bool,
    picture: Option<crate::picture::Svg>,
) -> Result<u8, Failure> {
    crate::commands::check_fit_args(headroom, output, force, picture)?;
    let inputs = resolve(source)?;
    let eff = inputs.efficiencies();
    let Inputs {
        loaded,
        gpu,
        gpu_line,
        speed,
        time,
        ..
    } = inputs;
    let card = speed.map_err(|why| Failure::Input(format!("fit --fastest: {why}")))?;
    let file = &loaded.file;
    let timing = Timing {
        gpu: &card,
        keys: &file.time,
        eff: &eff,
    };
    let mut estimator = Estimator::new();
    // the nearest fit keeps the GPUs and sharding where the written file cannot hold them
    let search = if crate::commands::keeps_hardware(source, file, output) {
        fastest_in_place
    } else {
        fastest
    };
    let Some(found) = search(&file.run, gpu, headroom / 100.0, &timing, &mut estimator) else {
        let text = if json {
            // `fit --json`'s own answer: the floors and the smallest GPU
            let nearest = if crate::commands::keeps_hardware(source, file, output) {
                grpofit_core::fit::fit_in_place
            } else {
                grpofit_core::fit::fit
            };
            let outcome = nearest(&file.run, gpu, headroom / 100.0, &mut estimator);
            json_text(&serde_json::to_value(&outcome).map_err(|e| e.to_string())?)?
        } else {
            format!(
                "run: {}\nnothing fits {gpu_line} with {headroom}% free: `grpofit fit` names the floors\n",
                loaded.origin
            )
        };
        emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(DOES_NOT_FIT))?;
        return Ok(DOES_NOT_FIT);
    };
    let text = if json {
        let mut v = serde_json::to_value(&found).map_err(|e| e.to_string())?;
        v["outcome"] = serde_json::json!("fastest");
        v["step_time_calibrated"] = serde_json::json!(time.as_ref().map(|t| t.said()));
        json_text(&v)?
    } else {
        format!(
            "run: {}\n{}",
            loaded.origin,
            text(&found, &gpu_line, headroom),
        ) + &crate::step_time::calibrated_line(time.as_ref())
    };
    let printed = emit(|out| out.write_all(text.as_bytes()));
    if let Some(svg) = picture {
        crate::picture::write_svg_timed(
            svg,
            &found.run,
            &found.estimate,
            &gpu_line,
            None,
            Some(&found.step_time),
        )?;
    }
    if let Some(out) = output {
        let from = file.source.as_ref().map(|s| s.format);
        let check =
            |text: &str| written_as_found(source, text, (out, from), &found, (gpu, &timing));
        crate::commands::export_run_checked(
            &timed_on(file, &card, source),
            &found.run,
            (gpu, &gpu_line),
            &found.estimate,
            (out, force),
            FITS,
            &check,
        )?;
    }
    printed.map_err(unwritten(FITS))?;
    Ok(FITS)
}

/// `file` naming the card its step was timed on (`--gpu`, the detected card, or the file's),
/// with the figures `--gpu-tflops` / `--gpu-bandwidth` gave it: the written run's step is the
/// one printed, not the preset's card's.
fn timed_on(file: &RunFile, card: &GpuSpeed, source: &Source) -> RunFile {
    let mut timed = file.clone();
    // the file's own spelling where it names the same card (`gpu = "h100"` stays)
    let same_card =
        |own: &String| grpofit_core::hardware::lookup(own).is_some_and(|c| c.name == card.name);
    if !file.time.gpu.as_ref().is_some_and(same_card) {
        timed.time.gpu = Some(card.name.clone());
    }
    timed.time.gpu_tflops = source.gpu_tflops.or(file.time.gpu_tflops);
    timed.time.gpu_bandwidth = source.gpu_bandwidth.or(file.time.gpu_bandwidth);
    timed
}

/// Refuses a written run that does not read back as the one found: a change the written file
/// cannot hold (a key its trainer release lacks) would leave a run that is slower, or no
/// longer fits, under the name of the fastest fit.
fn written_as_found(
    source: &Source,
    text: &str,
    (out, written_from): (
        &std::path::Path,
        Option<grpofit_core::config::source::Format>,
    ),
    found: &Fastest,
    (gpu, timing): (GpuBudget, &Timing),
) -> Result<(), Failure> {
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty());
    let name = out.display().to_string();
    // the text is in the format text_for wrote: the source's for `-`, else the path's
    let format = match (out == std::path::Path::new("-"), written_from) {
        (true, Some(f)) => f,
        _ => grpofit_core::config::source::Format::of(out),
    };
    let back = crate::inputs::reread(source, text, &name, dir, format)
        .map_err(|e| format!("fit --fastest -o {name}: the run built does not read back: {e}"))?;
    let again = Estimator::new().estimate(&back.run, gpu);
    let t = timing;
    let seconds = time::step_time(&back.run, &again, t.gpu, t.keys, t.eff).seconds;
    let same_time = (seconds - found.step_time.seconds).abs() <= 1e-9 * seconds.max(1.0);
    if again.total_bytes != found.estimate.total_bytes || !same_time {
        return Err(Failure::Input(format!(
            "fit --fastest -o {name}: the file would read back as a different run ({}, {} a step, where the fastest fit takes {}, {} a step): not written",
            format_size(again.total_bytes),
            time::seconds(seconds),
            format_size(found.estimate.total_bytes),
            time::seconds(found.step_time.seconds)
        )));
    }
    Ok(())
}

/// The answer in words: the fastest step, against the nearest fit, and each change.
fn text(found: &Fastest, gpu_line: &str, headroom: f64) -> String {
    let mut s = String::new();
    if !found.nearest_changes.is_empty() {
        s.push_str("the nearest fit (as `grpofit fit` gives it) changes first:\n");
        s.push_str(&grpofit::report::change_table(&found.nearest_changes));
        s.push_str("then the speed moves, from the nearest fit:\n");
    }
    s.push_str(&format!(
        "fastest that fits {gpu_line} with {headroom}% free:\n  {}\n",
        time::summary(&found.step_time)
    ));
    if found.changes.is_empty() {
        s.push_str(&format!(
            "  the nearest fit is already the fastest ({} a step): no throughput knob makes it faster\n",
            time::seconds(found.nearest_seconds)
        ));
        return s;
    }
    s.push_str(&format!(
        "  {:.2}x faster than the nearest fit ({} a step)\n",
        found.speedup,
        time::seconds(found.nearest_seconds)
    ));
    for c in &found.changes {
        let secs = if c.seconds_saved >= 0.0 {
            format!("saves {} a step", time::seconds(c.seconds_saved))
        } else {
            format!("costs +{} a step", time::seconds(-c.seconds_saved))
        };
        let bytes = if c.bytes_saved >= 0 {
            format!("frees {}", format_size(c.bytes_saved as u64))
        } else {
            format!("takes {}", format_size((-c.bytes_saved) as u64))
        };
        let with: String = c
            .with
            .iter()
            .map(|w| format!(", {} {} → {}", w.key, w.from, w.to))
            .collect();
        let bytes = match c.phase_saved {
            Some(p) if c.makes_room_for.is_some() => format!(
                "frees {} in the {} phase",
                format_size(p.bytes_saved),
                p.phase.label()
            ),
            _ => bytes,
        };
        let effect = match &c.makes_room_for {
            Some(next) if time::seconds(c.seconds_saved.abs()) == time::seconds(0.0) => {
                format!("makes room for {next} ({bytes})")
            }
            Some(next) => format!("makes room for {next} ({bytes}, {secs})"),
            None => format!("{secs}, {bytes}"),
        };
        s.push_str(&format!(
            "  {}: {} → {}{with}: {effect}\n",
            c.key, c.from, c.to
        ));
        if let Some(note) = c.note {
            s.push_str(&format!("    {note}\n"));
        }
    }
    s
}
