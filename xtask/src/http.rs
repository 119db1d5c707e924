//! A small std-only static file server for `dist/`: enough HTTP/1.1 for a browser and the
//! test driver, with the headers the page needs to be `crossOriginIsolated`.
//!
//! Contract:
//! - Only `GET` and `HEAD`; anything else is `405`.
//! - Every response carries `Cross-Origin-Opener-Policy: same-origin`,
//!   `Cross-Origin-Embedder-Policy: require-corp` and `Cross-Origin-Resource-Policy:
//!   same-origin` (SharedArrayBuffer and, later, wasm threads need the first two; the third
//!   lets our own resources load under `require-corp`).
//! - A request path is percent-decoded once and split on `/`; any `..` segment, a backslash,
//!   a NUL or a path that canonicalizes outside the root is refused with `403`, so neither
//!   `/../x` nor `/%2e%2e/x` nor `/..%2fx` reaches a file outside the root.
//! - One thread per connection, `Connection: close`: the page loads a dozen files, so this
//!   stays simple rather than fast.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// Why a request path maps to no file.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The path tries to leave the served folder (or is malformed): 403.
    Forbidden,
    /// Inside the folder, but nothing is there: 404.
    NotFound,
}

/// A running server; dropping it does not stop it (the accept thread lives as long as the
/// process), which suits both `serve` and a test run that ends with the process.
pub struct Server {
    pub addr: SocketAddr,
}

/// Binds `host:port` (port 0 picks a free one) and serves `root` on background threads.
pub fn start(root: &Path, host: &str, port: u16) -> Result<Server, String> {
    start_with_mounts(root, host, port, &[])
}

/// [`start`], also serving each `(prefix, folder)` of `mounts` under `/prefix/` (the page
/// tests' fixtures, which the page fetches as a user's server would serve them) and
/// counting the requests for them, which `GET /__requests` returns as JSON (`{path: n}`):
/// how a test sees that a reload downloaded nothing.
pub fn start_with_mounts(
    root: &Path,
    host: &str,
    port: u16,
    mounts: &[(&str, PathBuf)],
) -> Result<Server, String> {
    let canonical =
        |dir: &Path| dir.canonicalize().map_err(|e| format!("cannot serve {}: {e}", dir.display()));
    let mut site = Site { root: canonical(root)?, mounts: Vec::new(), counts: Mutex::new(BTreeMap::new()) };
    for (prefix, dir) in mounts {
        site.mounts.push((format!("/{}/", prefix.trim_matches('/')), canonical(dir)?));
    }
    let listener =
        TcpListener::bind((host, port)).map_err(|e| format!("cannot listen on {host}:{port}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let site = Arc::new(site);
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let site = Arc::clone(&site);
            thread::spawn(move || {
                let _ = handle(stream, &site);
            });
        }
    });
    Ok(Server { addr })
}

/// What a server serves: its root, the mounted folders, and the requests for those.
struct Site {
    root: PathBuf,
    mounts: Vec<(String, PathBuf)>,
    counts: Mutex<BTreeMap<String, usize>>,
}

impl Site {
    /// The folder and the target within it that `target` names, counting a mount's requests.
    fn locate<'a>(&'a self, target: &'a str) -> (&'a Path, String) {
        let path = target.split(['?', '#']).next().unwrap_or("");
        for (prefix, dir) in &self.mounts {
            if let Some(rest) = path.strip_prefix(prefix.as_str()) {
                *self.counts.lock().unwrap().entry(path.to_string()).or_default() += 1;
                return (dir, format!("/{rest}"));
            }
        }
        (&self.root, target.to_string())
    }

    /// The request counts as JSON, by path.
    fn counts_json(&self) -> String {
        let counts = self.counts.lock().unwrap();
        let fields: Vec<String> = counts.iter().map(|(path, n)| format!("{path:?}: {n}")).collect();
        format!("{{{}}}", fields.join(", "))
    }
}

fn handle(mut stream: TcpStream, site: &Site) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Drain the headers; nothing in them changes the answer.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" && method != "HEAD" {
        return respond(&mut stream, 405, "text/plain; charset=utf-8", b"method not allowed\n", true);
    }
    let head_only = method == "HEAD";
    if !site.mounts.is_empty() && target == "/__requests" {
        return respond(&mut stream, 200, "application/json", site.counts_json().as_bytes(), !head_only);
    }
    let (root, target) = site.locate(target);
    // Mounted folders stand for files fetched over a network: their bodies go out in paced
    // pieces, so a page sees a large download arrive part by part (its progress) rather than
    // in the one read a loopback copy of a small file often is.
    let paced = root != site.root.as_path();
    match resolve(root, &target) {
        Ok(path) => match std::fs::read(&path) {
            Ok(body) if paced && !head_only => respond_paced(&mut stream, mime_type(&path), &body),
            Ok(body) => respond(&mut stream, 200, mime_type(&path), &body, !head_only),
            Err(_) => respond(&mut stream, 404, "text/plain; charset=utf-8", b"not found\n", !head_only),
        },
        Err(Refusal::NotFound) => {
            respond(&mut stream, 404, "text/plain; charset=utf-8", b"not found\n", !head_only)
        }
        Err(Refusal::Forbidden) => {
            respond(&mut stream, 403, "text/plain; charset=utf-8", b"forbidden\n", !head_only)
        }
    }
}

/// A 200 whose body goes out in 64 KiB pieces a millisecond apart (see `handle`).
fn respond_paced(stream: &mut TcpStream, mime: &str, body: &[u8]) -> std::io::Result<()> {
    let (first, rest) = body.split_at(body.len().min(PACED_PIECE));
    respond_with_length(stream, 200, mime, body.len(), first)?;
    for piece in rest.chunks(PACED_PIECE) {
        std::thread::sleep(Duration::from_millis(1));
        stream.write_all(piece)?;
        stream.flush()?;
    }
    Ok(())
}

const PACED_PIECE: usize = 64 * 1024;

fn respond(
    stream: &mut TcpStream,
    status: u16,
    mime: &str,
    body: &[u8],
    send_body: bool,
) -> std::io::Result<()> {
    respond_with_length(stream, status, mime, body.len(), if send_body { body } else { &[] })
}

/// The head (announcing `len` bytes) and `first`, the body or its first part.
fn respond_with_length(
    stream: &mut TcpStream,
    status: u16,
    mime: &str,
    len: usize,
    first: &[u8],
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Method Not Allowed",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {mime}\r\nContent-Length: {len}\r\n\
         Cross-Origin-Opener-Policy: same-origin\r\nCross-Origin-Embedder-Policy: require-corp\r\n\
         Cross-Origin-Resource-Policy: same-origin\r\nX-Content-Type-Options: nosniff\r\n\
         Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(first)?;
    stream.flush()
}

/// Maps a request target (`/a/b.js?x=1`) to a file under `root` (already canonical).
/// `/` and folders map to their `index.html`.
pub fn resolve(root: &Path, target: &str) -> Result<PathBuf, Refusal> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    if !path.starts_with('/') {
        return Err(Refusal::Forbidden);
    }
    let decoded = percent_decode(path).ok_or(Refusal::Forbidden)?;
    let mut rel = PathBuf::new();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => continue,
            ".." => return Err(Refusal::Forbidden),
            s if s.contains('\\') || s.contains('\0') || s.contains(':') => return Err(Refusal::Forbidden),
            s => rel.push(s),
        }
    }
    // Belt and braces: after the segment check nothing but normal components remain.
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(Refusal::Forbidden);
    }
    let mut full = root.join(&rel);
    if full.is_dir() {
        full.push("index.html");
    }
    let canonical = full.canonicalize().map_err(|_| Refusal::NotFound)?;
    if !canonical.starts_with(root) {
        // A symlink pointing out of the folder.
        return Err(Refusal::Forbidden);
    }
    if !canonical.is_file() {
        return Err(Refusal::NotFound);
    }
    Ok(canonical)
}

/// Decodes `%XX` escapes once; `None` for a malformed escape or non-UTF-8 result.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The `Content-Type` for a file we ship; browsers refuse module scripts and streaming wasm
/// compilation without the right one.
pub fn mime_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "wasm" => "application/wasm",
        "txt" | "ts" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "safetensors" => "application/octet-stream",
        _ => "application/octet-stream",
    }
}

/// Fetches `path` from a running server: `(status, headers, body)`, for the tests.
#[cfg(test)]
pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String, Vec<u8>)> {
    use std::io::Read;
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = raw.get(split + 4..).unwrap_or_default().to_vec();
    Ok((status, head, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `<tmp>/outside.txt` next to a served `<tmp>/dist/` with `index.html` and `pkg/a.wasm`.
    /// One folder per test (`name`): tests run in parallel and must not rewrite each other's files.
    fn fixture(name: &str) -> (PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!("tinygpt-http-{name}-{}", std::process::id()));
        let dist = base.join("dist");
        std::fs::create_dir_all(dist.join("pkg")).unwrap();
        std::fs::write(base.join("outside.txt"), "secret").unwrap();
        std::fs::write(dist.join("index.html"), "<!doctype html>").unwrap();
        std::fs::write(dist.join("pkg/a.wasm"), b"\0asm").unwrap();
        (base.canonicalize().unwrap(), dist.canonicalize().unwrap())
    }

    #[test]
    fn traversal_plain_and_percent_encoded_is_refused() {
        let (_, dist) = fixture("traversal");
        for target in [
            "/../outside.txt",
            "/pkg/../../outside.txt",
            "/%2e%2e/outside.txt",
            "/%2E%2E/outside.txt",
            "/..%2foutside.txt",
            "/%2e%2e%2foutside.txt",
            "/pkg/..%2f..%2foutside.txt",
            "/..\\outside.txt",
            "/%5c..%5coutside.txt",
            "/%00",
            "/%zz",
            "outside.txt",
        ] {
            assert_eq!(resolve(&dist, target), Err(Refusal::Forbidden), "{target}");
        }
        // Double encoding decodes once: `%252e%252e` is a file literally named `%2e%2e`.
        assert_eq!(resolve(&dist, "/%252e%252e/outside.txt"), Err(Refusal::NotFound));
    }

    #[test]
    fn files_folders_and_queries_resolve_inside_the_root() {
        let (_, dist) = fixture("resolve");
        assert_eq!(resolve(&dist, "/").unwrap(), dist.join("index.html"));
        assert_eq!(resolve(&dist, "/?storage=idb").unwrap(), dist.join("index.html"));
        assert_eq!(resolve(&dist, "/pkg/a.wasm").unwrap(), dist.join("pkg/a.wasm"));
        assert_eq!(resolve(&dist, "/pkg/./a.wasm").unwrap(), dist.join("pkg/a.wasm"));
        assert_eq!(resolve(&dist, "/missing.js"), Err(Refusal::NotFound));
    }

    #[test]
    fn server_sends_isolation_headers_wasm_type_and_refuses_traversal() {
        let (_, dist) = fixture("server");
        let server = start(&dist, "127.0.0.1", 0).unwrap();
        let (status, head, body) = get(server.addr, "/pkg/a.wasm").unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, b"\0asm");
        for header in [
            "Content-Type: application/wasm",
            "Cross-Origin-Opener-Policy: same-origin",
            "Cross-Origin-Embedder-Policy: require-corp",
            "Cross-Origin-Resource-Policy: same-origin",
        ] {
            assert!(head.contains(header), "missing {header} in\n{head}");
        }
        let (status, _, body) = get(server.addr, "/%2e%2e/outside.txt").unwrap();
        assert_eq!(status, 403);
        assert!(!String::from_utf8_lossy(&body).contains("secret"));
        assert_eq!(get(server.addr, "/..%2foutside.txt").unwrap().0, 403);
        assert_eq!(get(server.addr, "/nope.html").unwrap().0, 404);
        let (status, head, _) = get(server.addr, "/").unwrap();
        assert_eq!(status, 200);
        assert!(head.contains("Content-Type: text/html"), "{head}");
    }

    #[test]
    fn mounted_folders_are_served_counted_and_kept_inside() {
        let (base, dist) = fixture("mounts");
        let server = start_with_mounts(&dist, "127.0.0.1", 0, &[("fixtures/pkg", dist.join("pkg"))]).unwrap();
        assert_eq!(get(server.addr, "/fixtures/pkg/a.wasm").unwrap().2, b"\0asm");
        assert_eq!(get(server.addr, "/fixtures/pkg/a.wasm?x").unwrap().0, 200);
        assert_eq!(get(server.addr, "/fixtures/pkg/missing").unwrap().0, 404);
        assert_eq!(get(server.addr, "/fixtures/pkg/..%2f..%2foutside.txt").unwrap().0, 403);
        let counts = String::from_utf8(get(server.addr, "/__requests").unwrap().2).unwrap();
        assert!(counts.contains("\"/fixtures/pkg/a.wasm\": 2"), "{counts}");
        assert!(counts.contains("\"/fixtures/pkg/missing\": 1"), "{counts}");
        drop(base);
    }
}
