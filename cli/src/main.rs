//! `tinygpt`: train, sample, evaluate and benchmark a byte-level GPT from the terminal.

mod args;
mod commands;
mod compute;
mod error;
mod model_dir;
mod run_config;
mod text;

use clap::Parser;

use crate::args::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Train(a) => commands::train::run(a),
        Command::Sample(a) => commands::sample::run(a),
        Command::Eval(a) => commands::eval::run(a),
        Command::Bench(a) => commands::bench::run(a),
    };
    if let Err(e) = result {
        eprintln!("tinygpt: error: {e}");
        std::process::exit(1);
    }
}
