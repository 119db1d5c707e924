//! `cargo xtask serve [--port 8080] [--host 127.0.0.1] [--no-build] [--example]`: builds the
//! page (cargo rebuilds only what changed) and serves `dist/` until interrupted. With
//! `--example` it serves the example page instead (examples/web-page/), installed from the
//! packed npm package (`npm_pack::install_example`).

use crate::util::parse_options;
use crate::{http, npm_pack, web_build};

pub fn run_task(args: &[String]) -> Result<(), String> {
    // A flag without a value, which parse_options knows only as `--no-…`.
    let example = args.iter().any(|a| a == "--example");
    let args: Vec<String> = args.iter().filter(|a| *a != "--example").cloned().collect();
    let (mut host, mut port, mut build) = ("127.0.0.1".to_string(), 8080u16, true);
    for (name, value) in parse_options(&args, &["--port", "--host", "--no-build", "--example"])? {
        match name {
            "--port" => port = value.parse().map_err(|_| format!("--port {value:?} is not a port number"))?,
            "--host" => host = value.to_string(),
            _ => build = false,
        }
    }
    let dist = web_build::dist_dir();
    if build || !dist.join("index.html").is_file() {
        web_build::build()?;
    }
    let root = if example {
        let tarball = if build { npm_pack::pack()? } else { npm_pack::pack_if_stale()? };
        npm_pack::install_example(&tarball)?
    } else {
        dist
    };
    let server = http::start(&root, &host, port)?;
    println!("TinyGPT is at http://{}/ (serving {}; Ctrl-C stops)", server.addr, root.display());
    loop {
        std::thread::park();
    }
}
