//! `tinygpt`: train, sample, evaluate and benchmark a byte-level GPT from the terminal.
// The argument structs' doc comments are clap's --help text: plain text where `<base>` is a
// placeholder, not Markdown (rustdoc would read it as an HTML tag).
#![allow(rustdoc::invalid_html_tags)]

mod args;
mod base;
mod checkpoint;
mod commands;
mod compute;
mod error;
mod memory;
mod run_config;
mod text;
mod tokenizer;

use clap::error::ErrorKind;
use clap::Parser;

use crate::args::{AdapterFormat, Cli, Command, LoraCommand};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // Bare `tinygpt`: the usage, not its first line dressed as an error.
            eprint!("{}", e.render());
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("tinygpt: error: {} (see tinygpt --help)", clap_message(&e));
            std::process::exit(1);
        }
    };
    let result = match cli.command {
        Command::Train(a) => commands::train::run(a),
        Command::Sample(a) => commands::sample::run(a),
        Command::Eval(a) => commands::eval::run(a),
        Command::Bench(a) => commands::bench::run(a),
        Command::Export(a) => commands::transfer::export(a),
        Command::Import(a) => commands::transfer::import(a),
        Command::BenchGenerate(a) => commands::bench_generate::run(a),
        Command::DebugState(a) => commands::debug_state::run(a),
        Command::Checkpoints(a) => commands::checkpoints::run(a),
        Command::Lora(LoraCommand::Train(a)) => commands::lora::train(a),
        Command::Lora(LoraCommand::Merge(a)) => commands::lora::merge(a),
        Command::Lora(LoraCommand::List(a)) => commands::lora::list(a),
        Command::Lora(LoraCommand::Export(a)) if a.format == AdapterFormat::Peft => {
            commands::lora_peft::export(a)
        }
        Command::Lora(LoraCommand::Export(a)) => commands::lora::export(a),
        Command::Lora(LoraCommand::Import(a)) if a.format == AdapterFormat::Peft => {
            commands::lora_peft::import(a)
        }
        Command::Lora(LoraCommand::Import(a)) => commands::lora::import(a),
        Command::Lora(LoraCommand::Logits(a)) => commands::lora_peft::logits(a),
    };
    if let Err(e) = result {
        eprintln!("tinygpt: error: {e}");
        std::process::exit(1);
    }
}

/// clap's error as one line: what it says before the usage block, with the lines it
/// spreads over (a missing flag is named on the line after "not provided:") joined.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
        .collect();
    parts.join(" ").trim_start_matches("error: ").to_string()
}
