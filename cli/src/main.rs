//! `tinygpt`: train, sample, evaluate and benchmark a byte-level GPT from the terminal.

mod args;
mod checkpoint;
mod commands;
mod compute;
mod error;
mod run_config;
mod text;

use clap::Parser;

use crate::args::{Cli, Command};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line, like every other error; `--help` has the details.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default().trim_start_matches("error: ");
            eprintln!("tinygpt: error: {first} (see tinygpt --help)");
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
    };
    if let Err(e) = result {
        eprintln!("tinygpt: error: {e}");
        std::process::exit(1);
    }
}
