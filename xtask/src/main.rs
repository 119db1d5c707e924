//! Project tasks: `cargo xtask <task>`.

mod bench;
mod layers;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = args.split_first().map(|(t, r)| (t.as_str(), r)).unwrap_or(("help", &[]));
    let result = match task {
        "check-layers" => layers::run(rest),
        "bench" => bench::run(rest),
        _ => Err(format!("unknown task {task:?}; tasks: check-layers, bench")),
    };
    if let Err(e) = result {
        eprintln!("xtask {task}: {e}");
        std::process::exit(1);
    }
}
