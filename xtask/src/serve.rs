//! `cargo xtask serve [--port 8080] [--host 127.0.0.1] [--no-build]`: builds the page (cargo
//! rebuilds only what changed) and serves `dist/` until interrupted.

use crate::util::parse_options;
use crate::{http, web_build};

pub fn run_task(args: &[String]) -> Result<(), String> {
    let (mut host, mut port, mut build) = ("127.0.0.1".to_string(), 8080u16, true);
    for (name, value) in parse_options(args, &["--port", "--host", "--no-build"])? {
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
    let server = http::start(&dist, &host, port)?;
    println!("TinyGPT is at http://{}/ (serving {}; Ctrl-C stops)", server.addr, dist.display());
    loop {
        std::thread::park();
    }
}
