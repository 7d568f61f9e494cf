//! `--healthcheck URL`: one plain HTTP/1.1 `GET` of a gateway's `/healthz`, exit status 0 when
//! it answers 200 and 1 otherwise — the container image's `HEALTHCHECK`, since the image carries
//! this binary and nothing else (no curl, no shell). Standard library only: it runs before and
//! without the runtime, and reaches a gateway beside it, so `http://` only, with short bounds.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

/// How long connecting, sending and reading may each take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The most of the answer read: the status line is all that counts.
const HEAD_BYTES: u64 = 1024;

/// Runs the check against `url`: 0 on a 200, 1 (with the reason on stderr) otherwise.
pub(crate) fn run(url: &str) -> ExitCode {
    match check(url) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tool-health-gateway: --healthcheck {url:?}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `Ok` when `url` answers 200.
fn check(url: &str) -> Result<(), String> {
    let (authority, path) = split(url)?;
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| !p.ends_with(']'));
    let resolvable = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addrs = resolvable
        .as_str()
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {authority}: {e}"))?;
    let mut last = format!("{authority} resolves to no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, TIMEOUT) {
            Ok(stream) => return get(stream, authority, path),
            Err(e) => last = format!("cannot connect to {addr}: {e}"),
        }
    }
    Err(last)
}

/// `http://HOST:PORT/PATH` → (`HOST:PORT`, `/PATH`); the port defaults to 80, the path to `/`.
fn split(url: &str) -> Result<(&str, &str), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("give a plain http:// URL, e.g. http://127.0.0.1:8080/healthz")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || ".-:[]_".contains(c);
    if authority.is_empty() || !authority.chars().all(valid) {
        return Err("the URL names no valid host".to_owned());
    }
    if path.chars().any(|c| c.is_ascii_control() || c == ' ') {
        return Err("the URL's path has spaces or control characters".to_owned());
    }
    Ok((authority, path))
}

/// Sends the request on `stream` and reads the status code.
fn get(mut stream: TcpStream, authority: &str, path: &str) -> Result<(), String> {
    let io = |e: std::io::Error| format!("{authority}: {e}");
    stream.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: tool-health-gateway-healthcheck\r\nConnection: close\r\n\r\n"
    )
    .map_err(io)?;
    let mut head = Vec::new();
    stream
        .take(HEAD_BYTES)
        .read_to_end(&mut head)
        .or_else(|e| if head.is_empty() { Err(e) } else { Ok(0) })
        .map_err(io)?;
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    match line.split(' ').nth(1) {
        Some("200") => Ok(()),
        Some(code) if line.starts_with("HTTP/") => Err(format!("answered {code}")),
        _ => Err(format!("no HTTP answer ({:?})", line.trim_end())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn urls() {
        assert_eq!(
            split("http://127.0.0.1:8080/healthz").unwrap(),
            ("127.0.0.1:8080", "/healthz")
        );
        assert_eq!(split("http://localhost").unwrap(), ("localhost", "/"));
        assert_eq!(
            split("http://[::1]:9/healthz?x=1").unwrap(),
            ("[::1]:9", "/healthz?x=1")
        );
        assert!(split("https://127.0.0.1/healthz")
            .unwrap_err()
            .contains("http://"));
        assert!(split("127.0.0.1:8080").is_err());
        assert!(split("http:///healthz").is_err());
        assert!(split("http://a b/").is_err());
        assert!(split("http://h/x\r\nInjected: 1").is_err());
    }

    /// A one-shot server that answers `answer` to the first connection and gives back what
    /// it was sent.
    fn serve_once(answer: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/healthz", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 512];
            while !got.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            s.write_all(answer.as_bytes()).unwrap();
            String::from_utf8(got).unwrap()
        });
        (url, server)
    }

    #[test]
    fn a_200_passes_and_the_request_is_well_formed() {
        let (url, server) = serve_once("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        assert_eq!(check(&url), Ok(()));
        let request = server.join().unwrap();
        let port = url.split(':').nth(2).unwrap().split('/').next().unwrap();
        assert!(
            request.starts_with(&format!(
                "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            )),
            "{request}"
        );
    }

    #[test]
    fn anything_else_fails() {
        let (url, server) = serve_once("HTTP/1.1 503 Service Unavailable\r\n\r\n");
        assert_eq!(check(&url), Err("answered 503".to_owned()));
        server.join().unwrap();
        let (url, server) = serve_once("SSH-2.0-OpenSSH\r\n");
        assert!(check(&url).unwrap_err().contains("no HTTP answer"));
        server.join().unwrap();
        // Nothing listens on a port just released.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = check(&format!("http://127.0.0.1:{port}/healthz")).unwrap_err();
        assert!(e.contains("cannot connect"), "{e}");
    }
}
