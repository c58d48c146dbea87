//! `diagnose`: the last out-of-memory message of a log, read with the run that failed, its
//! likely tensor, the estimate's shortfall against what the process held, and the fit.

use crate::cli::{Cli, Source};
use crate::inputs::load_source;
use crate::output::*;
use grpofit_core::config::RunFile;
use grpofit_core::fit::{DEFAULT_HEADROOM, FitOutcome, fit};
use grpofit_core::memory::estimate::{Estimator, GpuBudget};
use grpofit_core::units::format_size;
use std::io::Write;

/// `diagnose`: the last OOM message of a log, read with the run that failed (`--config` or
/// `--preset`) and the GPU's memory (`--gpu-mem`, else the run file's) where the message gives
/// none.
pub(crate) fn run_diagnose(
    log: Option<&std::path::Path>,
    source: &Source,
    json: bool,
    picture: Option<crate::picture::Svg>,
) -> Result<u8, Failure> {
    use std::io::IsTerminal;
    picture.map(crate::picture::Svg::check).transpose()?;
    if log.is_none() && std::io::stdin().is_terminal() {
        // nothing piped in: say what is expected rather than wait for a log typed by hand
        use clap::CommandFactory;
        let mut cli = Cli::command();
        cli.build();
        let usage = cli
            .find_subcommand_mut("diagnose")
            .map(|c| c.render_usage().to_string())
            .unwrap_or_default();
        return Err(Failure::Input(format!(
            "diagnose: no log given and standard input is a terminal: name the log file, or pipe the log in (`-` reads standard input)\n{usage}"
        )));
    }
    let gpu_mem = crate::inputs::gpu_mem(source)?;
    // the log's last 16 MiB (log_tail.rs): the last OOM message is at its end
    let (bytes, cut) = match log {
        Some(p) if p != std::path::Path::new("-") => crate::log_tail::read_file_end(p)
            .map_err(|e| format!("{}: cannot read: {e}", p.display()))?,
        _ => crate::log_tail::read_end(std::io::stdin().lock())
            .map_err(|e| format!("standard input: {e}"))?,
    };
    let text = String::from_utf8_lossy(&bytes);
    let shown = log.map_or("standard input".to_string(), |p| p.display().to_string());
    if cut {
        say(&format!(
            "grpofit: note: {shown}: only its last {} MiB are read, where the last out-of-memory message is",
            crate::log_tail::KEPT >> 20
        ));
    }
    let text = diagnosis_drawn(&text, &shown, source, gpu_mem, json, picture)?;
    emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(FITS))?;
    Ok(FITS)
}

/// The diagnosis of the last OOM message of `text` (`shown` names it), as `diagnose` prints it:
/// with the run of `source` when it names one, the GPU's memory from the message, else
/// `gpu_mem`, else the run file's. `grpofit run` prints it when its command runs out of memory.
pub(crate) fn diagnosis(
    text: &str,
    shown: &str,
    source: &Source,
    gpu_mem: Option<u64>,
    json: bool,
) -> Result<String, Failure> {
    diagnosis_drawn(text, shown, source, gpu_mem, json, None)
}

/// `diagnosis`, and with `picture` (`diagnose --svg`) the memory bar of the fit it proposes,
/// when it proposes one.
fn diagnosis_drawn(
    text: &str,
    shown: &str,
    source: &Source,
    gpu_mem: Option<u64>,
    json: bool,
    picture: Option<crate::picture::Svg>,
) -> Result<String, Failure> {
    let mut report = grpofit_core::diagnose::oom::diagnose(text)
        .ok_or_else(|| format!("{shown}: no out-of-memory message found"))?;
    // the run that failed: --config or --preset (no GPU is detected: the message describes it)
    let run = if source.config.is_some() || source.preset.is_some() {
        Some(
            load_source(
                source,
                &Err("diagnose takes the GPU from the message".to_string()),
            )?
            .file,
        )
    } else {
        None
    };
    assume_capacity(&mut report, gpu_mem, run.as_ref());
    // a tensor is looked for only in PyTorch's requests: vLLM's are its share or its KV cache
    let culprit = run.as_ref().filter(|_| !report.from_vllm()).and_then(|f| {
        report.requested_bytes.map(|r| {
            grpofit_core::diagnose::culprit::likely_request(&f.run, r, releases_in_force(f))
        })
    });
    let limit = report.limit_bytes();
    if run.is_some() && limit.is_none() {
        say(
            "grpofit: note: no fit proposed: neither the message nor the run file gives the GPU's memory (pass --gpu-mem SIZE)",
        );
    }
    // an older trainer's tensor on a run whose releases are not known: the estimate (today's
    // trainers) is the run after an upgrade, and its fit is the one to show
    let upgrade = culprit
        .as_ref()
        .is_some_and(|c| c.matches && c.older_trainers_only && c.built_by.is_none());
    let proposal = run
        .as_ref()
        .zip(limit)
        .map(|(f, capacity)| propose(&mut report, &f.run, capacity, upgrade));
    let mut advice = grpofit_core::diagnose::oom::advice(&report, run.as_ref().map(|f| &f.run));
    if let (Some(c), Some(f)) = (&culprit, &run) {
        let origin = f
            .versions
            .iter()
            .find(|p| p.package == grpofit_core::run::versions::Package::Unsloth)
            .map(|p| &p.origin);
        let outcome = proposal.as_ref().map(|p| &p.outcome);
        culprit_advice(c, origin, outcome, &mut advice);
    }
    let culprit = culprit.map(|c| c.sentence());
    if let (Some(svg), Some(p), Some(f)) = (picture, &proposal, &run) {
        draw_proposal(svg, &p.outcome, p.capacity, &f.run)?;
    }
    if json {
        let mut v = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        v["advice"] = serde_json::json!(advice);
        v["likely_request"] = serde_json::json!(culprit);
        v["estimate_bytes"] = serde_json::json!(proposal.as_ref().map(|p| p.estimate_bytes));
        v["estimate_short_bytes"] =
            serde_json::json!(proposal.as_ref().and_then(|p| p.short.map(|s| s.held_over)));
        v["fit"] = serde_json::to_value(proposal.as_ref().map(|p| &p.outcome))
            .map_err(|e| e.to_string())?;
        return Ok(json_text(&v)?);
    }
    let mut text = grpofit::report::diagnosis_text(&report, &advice, culprit.as_deref());
    if let (Some(p), Some(f)) = (&proposal, &run) {
        text.push('\n');
        text.push_str(&proposal_text(&report, p, &f.run));
    }
    Ok(text)
}

/// Whether the run's trainer releases are known rather than grpofit's defaults: pinned in the
/// run file, read from the Python environment, or implied by one of those.
fn releases_in_force(file: &RunFile) -> bool {
    use grpofit_core::run::versions::{Origin, Package};
    file.versions.iter().any(|p| {
        matches!(p.package, Package::Trl | Package::Unsloth) && p.origin != Origin::Default
    })
}

/// How far the estimate falls short of what the message shows the process holding.
#[derive(Clone, Copy)]
struct Short {
    /// what the process held
    held: u64,
    /// what it held over the estimate
    held_over: u64,
    /// what it held and asked for over the estimate: what the fit keeps free besides the run
    demand_over: u64,
}

/// The fit `diagnose` proposes on the message's GPU of `capacity`.
struct Proposal {
    outcome: FitOutcome,
    capacity: u64,
    estimate_bytes: u64,
    /// the process held more than the estimate (`None` when it did not, or when `upgrade`)
    short: Option<Short>,
    upgrade: bool,
}

/// The verdict in the light of the run's estimate, and the fit on the GPU the message describes
/// (less what other processes hold). When the message shows the process holding more than the
/// estimate, the fit is made from the message's figures: what the process held and asked for
/// beyond the estimate is kept free besides the run. `upgrade`: the request is a tensor only
/// older trainers build, which the estimate (today's trainers) leaves out by design.
fn propose(
    report: &mut grpofit_core::diagnose::oom::OomReport,
    run: &grpofit_core::run::RunConfig,
    capacity: u64,
    upgrade: bool,
) -> Proposal {
    let others = (report.other_processes.iter()).fold(0u64, |s, p| s.saturating_add(p.bytes));
    let gpu = GpuBudget {
        capacity: capacity.saturating_sub(others),
        used_by_others: 0,
        context: None,
    };
    let mut estimator = Estimator::new();
    let estimate = estimator.estimate(run, gpu);
    grpofit_core::diagnose::oom::refine(report, &estimate);
    let short = report
        .process_in_use_bytes
        .filter(|&held| held > estimate.total_bytes && !upgrade)
        .map(|held| Short {
            held,
            held_over: held - estimate.total_bytes,
            demand_over: (held + report.requested_bytes.unwrap_or(0))
                .saturating_sub(estimate.total_bytes),
        });
    // the fit keeps free, besides its headroom, what the estimate does not see: the run must
    // need no more than capacity x (1 - headroom) - demand_over by the estimate
    let headroom =
        DEFAULT_HEADROOM + short.map_or(0.0, |s| s.demand_over as f64 / gpu.capacity.max(1) as f64);
    Proposal {
        outcome: fit(run, gpu, headroom, &mut estimator),
        capacity,
        estimate_bytes: estimate.total_bytes,
        short,
        upgrade,
    }
}

/// The fit's text under the diagnosis: where the capacity came from, the estimate's shortfall
/// when the process held more, and the fit.
fn proposal_text(
    report: &grpofit_core::diagnose::oom::OomReport,
    p: &Proposal,
    run: &grpofit_core::run::RunConfig,
) -> String {
    let from = match (report.allowed_bytes, report.total_bytes) {
        (Some(_), _) => "the cap in the message",
        (None, Some(_)) => "from the message",
        (None, None) => report.assumed_total_from.unwrap_or("assumed"),
    };
    let mut text = String::new();
    let mut line = format!("{} ({from})", format_size(p.capacity));
    if let Some(s) = p.short {
        text.push_str(&format!(
            "the process held {}; the estimate is {}: it falls short by {}\n",
            format_size(s.held),
            format_size(p.estimate_bytes),
            format_size(s.held_over)
        ));
        line = format!(
            "{line}, less the {} the process held and asked for beyond the estimate",
            format_size(s.demand_over)
        );
    }
    let fitted = grpofit::report::fit_text(run, &p.outcome, &line, DEFAULT_HEADROOM * 100.0);
    let fitted = match (&p.outcome, p.short.is_some(), p.upgrade) {
        // the run crashed: it never "already fits" on the figures of its own message
        (FitOutcome::AlreadyFits { .. }, true, _) => fitted.replace(
            "already fits:",
            "the estimate fits even without what it does not see, yet the run ran out of memory:",
        ),
        (FitOutcome::AlreadyFits { .. }, false, true) => {
            fitted.replace("already fits:", &format!("{}:", today_fits()))
        }
        (FitOutcome::AlreadyFits { .. }, false, false) => fitted.replace(
            "already fits:",
            "the estimate fits, yet the run ran out of memory:",
        ),
        // the line's headroom is the estimate's: what the process held and asked for beyond
        // it is kept free too, and said with it
        (FitOutcome::Fitted { estimate, .. }, true, _) => {
            let s = p.short.map_or(0, |s| s.demand_over);
            let with = estimate.total_bytes.saturating_add(s);
            format!(
                "{fitted}with the {} beyond the estimate: {} of {} (headroom {})\n",
                format_size(s),
                format_size(with),
                format_size(estimate.capacity_bytes),
                format_size(estimate.capacity_bytes.saturating_sub(with))
            )
        }
        _ => fitted,
    };
    text.push_str(&fitted);
    text
}

/// "fits with today's trainers (trl 1.15.0, unsloth 2026.10.9)", from the releases grpofit
/// targets.
fn today_fits() -> String {
    format!("fits with today's trainers ({})", today_releases())
}

/// The trainer releases grpofit targets, as `trl X, unsloth Y`.
fn today_releases() -> String {
    use grpofit_core::run::versions::Package;
    format!(
        "trl {}, unsloth {}",
        Package::Trl.targeted(),
        Package::Unsloth.targeted()
    )
}

/// The GPU's memory when the message gives none: --gpu-mem, else the run file's gpu_memory;
/// `--gpu-mem` that the message overrules is said to be unused.
fn assume_capacity(
    report: &mut grpofit_core::diagnose::oom::OomReport,
    gpu_mem: Option<u64>,
    run: Option<&RunFile>,
) {
    let assumed = gpu_mem.map(|b| (b, "--gpu-mem")).or_else(|| {
        run.and_then(|f| f.gpu_memory)
            .map(|b| (b, "the run file's gpu_memory"))
    });
    if let Some((bytes, from)) = assumed
        && !report.assume_total(bytes, from)
        && from == "--gpu-mem"
    {
        say(&format!(
            "grpofit: note: --gpu-mem {} not used: the message gives the GPU's memory, {}",
            format_size(bytes),
            report.total_bytes.map_or_else(String::new, format_size)
        ));
    }
}

/// Where the run's release came from, in the advice's words (`run/implied.rs`'s origins): pinned
/// by the run file or a flag, found in the user's environment, or implied by another release.
fn release_source(origin: Option<&grpofit_core::run::versions::Origin>) -> String {
    use grpofit_core::run::versions::Origin;
    match origin {
        Some(Origin::RunFile) | None => "the version this run is pinned to".to_string(),
        Some(Origin::CommandLine(flag)) => format!("the version {flag} pins"),
        Some(Origin::Environment(path)) => {
            format!("the version found in your environment ({path})")
        }
        Some(Origin::Implied(why)) => {
            // `imply`'s reason reads "from trl 0.15.2 (run file): the newest modelled ..."
            let by = why.strip_prefix("from ").unwrap_or(why);
            let by = by.split_once(": ").map_or(by, |(anchors, _)| anchors);
            format!("the version implied by {by}")
        }
        Some(Origin::Default) => "grpofit's targeted release".to_string(),
    }
}

/// The advice a request gets when it is a tensor only older trainers build: the pinned release
/// that builds it, or, when today's trainers fit the same run (`proposal` already fits), the
/// upgrade.
fn culprit_advice(
    c: &grpofit_core::diagnose::culprit::Request,
    origin: Option<&grpofit_core::run::versions::Origin>,
    proposal: Option<&FitOutcome>,
    advice: &mut Vec<String>,
) {
    if let (true, Some(who)) = (c.matches, &c.built_by) {
        advice.insert(
                0,
                format!(
                    "this request is {}: {who}, {}, builds it in every step (the fit below is on that stack; {} never build it)",
                    c.tensor,
                    release_source(origin),
                    today_releases()
                ),
            );
    }
    if let Some(FitOutcome::AlreadyFits { estimate }) = proposal
        && c.matches
        && c.older_trainers_only
    {
        advice.insert(
                0,
                format!(
                    "this request is {}: today's trainers ({}) never build it, and the same run needs {} of {} with them; upgrade the trainer",
                    c.tensor,
                    today_releases(),
                    format_size(estimate.total_bytes),
                    format_size(estimate.capacity_bytes)
                ),
            );
    }
}

/// `diagnose --svg`: the memory bar of the fit proposed on the message's GPU of `capacity`.
fn draw_proposal(
    svg: crate::picture::Svg,
    outcome: &FitOutcome,
    capacity: u64,
    failed: &grpofit_core::run::RunConfig,
) -> Result<(), Failure> {
    let (run, est) = match outcome {
        FitOutcome::Fitted { run, estimate, .. } => (&**run, estimate),
        FitOutcome::AlreadyFits { estimate } | FitOutcome::Impossible { estimate, .. } => {
            (failed, estimate)
        }
    };
    let gpu = format!(
        "{} of the message's {} left to this run; the fit proposed",
        format_size(est.capacity_bytes),
        format_size(capacity)
    );
    crate::picture::write_svg(svg, run, est, &gpu, None)?;
    Ok(())
}
