use clap::Parser;
use std::io;
use std::process::ExitCode;

mod calibrate;
mod calibrate_rewards;
mod cli;
mod commands;
mod diagnose_command;
mod env_command;
mod fastest_command;
mod host;
mod inputs;
mod launch;
mod log_tail;
mod loop_commands;
mod output;
mod picture;
mod python_probe;
mod step_time;
mod versions_env;

use cli::{Cli, Command};
use commands::*;
use diagnose_command::run_diagnose;
use inputs::merge;
use output::{BAD_INPUT, FAILED, Failure, say};
use picture::Svg;

fn main() -> ExitCode {
    if let Err(e) = color_eyre::install() {
        say(&format!("grpofit: {e}"));
    }
    let cli = Cli::parse();
    if let (Some(log), Some(_)) = (&cli.follow, &cli.command) {
        say(&format!(
            "grpofit: --follow {}: the screen follows a run; it takes no command",
            log.display()
        ));
        return ExitCode::from(BAD_INPUT);
    }
    exit_code(dispatch(cli))
}

/// Runs the command the line names (the screen when none).
fn dispatch(cli: Cli) -> Result<u8, Failure> {
    match cli.command {
        None => open_screen(&cli.source, !cli.no_mouse, cli.follow.as_deref()),
        Some(Command::Estimate {
            source,
            json,
            export,
            export_dir,
            force,
            main_process_ip,
            svg,
        }) => run_estimate(
            &merge(&cli.source, &source),
            json,
            Exports {
                run_file: export.as_deref(),
                launch_dir: export_dir.as_deref(),
                force,
                main_process_ip: main_process_ip.as_deref(),
                picture: Svg::new(svg.as_deref(), force),
            },
        ),
        Some(Command::Fit {
            source,
            headroom,
            output,
            force,
            json,
            svg,
            fastest: true,
        }) => fastest_command::run_fastest(
            &merge(&cli.source, &source),
            headroom,
            output.as_deref(),
            force,
            json,
            Svg::new(svg.as_deref(), force),
        ),
        Some(Command::Fit {
            source,
            headroom,
            output,
            force,
            json,
            svg,
            fastest: false,
        }) => run_fit(
            &merge(&cli.source, &source),
            headroom,
            output.as_deref(),
            force,
            json,
            Svg::new(svg.as_deref(), force),
        ),
        Some(Command::Diagnose {
            file,
            source,
            json,
            svg,
            force,
        }) => run_diagnose(
            file.as_deref(),
            &merge(&cli.source, &source),
            json,
            Svg::new(svg.as_deref(), force),
        ),
        Some(Command::Models { json }) => list_models(json),
        Some(Command::Presets { json }) => list_presets(&cli.source, json),
        Some(Command::Gpu { json }) => show_gpu(json),
        Some(Command::Env { json }) => env_command::show_env(&cli.source, json),
        Some(Command::Callback { output, force }) => loop_commands::write_callback(&output, force),
        Some(Command::Run {
            source,
            log,
            append,
            command,
        }) => launch::run_command(
            &merge(&cli.source, &source),
            log.as_deref(),
            append,
            &command,
        ),
        Some(Command::Calibrate(args)) => calibrate::run_calibrate(&args, &cli.source),
        Some(Command::Check {
            log,
            source,
            json,
            svg,
            force,
        }) => loop_commands::run_check(
            &log,
            &merge(&cli.source, &source),
            json,
            Svg::new(svg.as_deref(), force),
        ),
    }
}

/// The process's exit code for a command's result, saying what went wrong.
fn exit_code(result: Result<u8, Failure>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Failure::Input(message)) => {
            say(&format!("grpofit: {message}"));
            ExitCode::from(BAD_INPUT)
        }
        // The reader left early (`| head -1`, `| true`): that is no failure, and saying so on
        // standard error would only be noise. Like ripgrep, which exits quietly with its
        // answer's code on EPIPE (0, "found", since it had output to write), grpofit stops
        // writing and exits with the answer it had already reached (0 fits, 3 does not fit,
        // 1 no GPU), so that a script under `set -o pipefail` still reads the verdict.
        Err(Failure::Output { error, answer }) if error.kind() == io::ErrorKind::BrokenPipe => {
            ExitCode::from(answer)
        }
        Err(Failure::Output { error, .. }) => {
            say(&format!(
                "grpofit: cannot write to standard output: {error}"
            ));
            ExitCode::from(FAILED)
        }
    }
}
