//! Just enough HTTP/1.1 for the inspector: one request per connection (`Connection: close`), GET
//! only, a bounded head, no body. Requests are read with a timeout, so a connection that never
//! finishes its head holds one thread for at most [`REQUEST_READ_TIMEOUT`].

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Largest request head (request line and headers) read, in bytes. A longer head is answered 431.
pub(crate) const REQUEST_HEAD_BYTES_MAX: usize = 16 * 1024;

/// How long a connection may take to send its request head.
pub(crate) const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long writing an answer may stall before the connection is dropped.
pub(crate) const RESPONSE_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// A request as the inspector sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub method: String,
    /// The path, percent-decoded.
    pub path: String,
    /// Query parameters in order, percent-decoded (`+` is a space).
    pub query: Vec<(String, String)>,
    /// Headers with lower-case names.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// The value of cookie `name`.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .filter(|(key, _)| key == "cookie")
            .flat_map(|(_, value)| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
    }

    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

/// Why a request could not be read; each maps to one status.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    #[error("request head longer than {REQUEST_HEAD_BYTES_MAX} bytes")]
    TooLarge,
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    #[error("connection closed before the request head ended")]
    Closed,
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Reads one request head from `stream`.
pub(crate) fn read_request(stream: &mut TcpStream) -> Result<Request, RequestError> {
    stream.set_read_timeout(Some(REQUEST_READ_TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let read = stream.read(&mut chunk)?;
        if read == 0 {
            return Err(RequestError::Closed);
        }
        head.extend_from_slice(&chunk[..read]);
        if let Some(end) = find_head_end(&head) {
            head.truncate(end);
            break;
        }
        if head.len() > REQUEST_HEAD_BYTES_MAX {
            return Err(RequestError::TooLarge);
        }
    }
    if head.len() > REQUEST_HEAD_BYTES_MAX {
        return Err(RequestError::TooLarge);
    }
    parse_head(&head)
}

fn find_head_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|window| window == b"\r\n\r\n")
}

/// Parses a request head (without its blank line).
pub(crate) fn parse_head(head: &[u8]) -> Result<Request, RequestError> {
    let text = std::str::from_utf8(head).map_err(|_| RequestError::Malformed("head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().ok_or(RequestError::Malformed("no request line"))?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(RequestError::Malformed("request line is not `METHOD TARGET VERSION`"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(RequestError::Malformed("not HTTP/1.x"));
    }
    if !target.starts_with('/') {
        return Err(RequestError::Malformed("target is not an absolute path"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':').ok_or(RequestError::Malformed("header without `:`"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    Ok(Request {
        method: method.to_owned(),
        path: percent_decode(path, false).ok_or(RequestError::Malformed("bad percent-encoding in path"))?,
        query: parse_query(query).ok_or(RequestError::Malformed("bad percent-encoding in query"))?,
        headers,
    })
}

fn parse_query(query: &str) -> Option<Vec<(String, String)>> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((percent_decode(key, true)?, percent_decode(value, true)?))
        })
        .collect()
}

/// Decodes `%XX` escapes (and `+` as a space in a query); `None` for a broken escape or a result
/// that is not UTF-8.
pub(crate) fn percent_decode(text: &str, plus_is_space: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'%' => {
                let hex = bytes.get(at + 1..at + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                at += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                at += 1;
            }
            byte => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// An answer.
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// A `Set-Cookie` value.
    pub cookie: Option<String>,
}

impl Response {
    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        Response {
            status,
            content_type: "application/json; charset=utf-8",
            body: value.to_string().into_bytes(),
            cookie: None,
        }
    }

    /// An error answer: `{"error": message}`.
    pub fn error(status: u16, message: impl Into<String>) -> Response {
        Response::json(status, &serde_json::json!({ "error": message.into() }))
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// Writes `response` and closes the connection's write side.
pub(crate) fn write_response(stream: &mut TcpStream, response: &Response) -> io::Result<()> {
    stream.set_write_timeout(Some(RESPONSE_WRITE_TIMEOUT))?;
    // NOTE: the page is loaded with the token in its URL: `no-referrer` keeps it out of any
    // Referer header, and the policy admits only the inspector's own scripts and styles.
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
         Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nX-Content-Type-Options: nosniff\r\n\
         X-Frame-Options: DENY\r\nContent-Security-Policy: default-src 'none'; script-src 'self'; \
         style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'\r\n{}{}\r\n",
        response.status,
        reason_phrase(response.status),
        response.content_type,
        response.body.len(),
        if response.status == 405 { "Allow: GET\r\n" } else { "" },
        response.cookie.as_ref().map(|cookie| format!("Set-Cookie: {cookie}\r\n")).unwrap_or_default(),
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&response.body)?;
    stream.flush()?;
    stream.shutdown(std::net::Shutdown::Write)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_get_with_query_and_headers() {
        let request =
            parse_head(b"GET /api/search?q=hello+world%21&token=ab HTTP/1.1\r\nHost: x\r\nX-Mnemo-Token: t")
                .unwrap();
        assert_eq!(request.method, "GET");
        assert_eq!(request.path, "/api/search");
        assert_eq!(request.param("q"), Some("hello world!"));
        assert_eq!(request.param("token"), Some("ab"));
        assert_eq!(request.header("x-mnemo-token"), Some("t"));
    }

    #[test]
    fn refuses_broken_heads() {
        assert!(matches!(parse_head(b"GET /"), Err(RequestError::Malformed(_))));
        assert!(matches!(parse_head(b"GET http://x/ HTTP/1.1"), Err(RequestError::Malformed(_))));
        assert!(matches!(parse_head(b"GET /?q=%zz HTTP/1.1"), Err(RequestError::Malformed(_))));
        assert!(matches!(parse_head(b"GET / SPDY/3"), Err(RequestError::Malformed(_))));
    }

    #[test]
    fn percent_decoding_keeps_plus_in_paths() {
        assert_eq!(percent_decode("a+b%2Fc", false).as_deref(), Some("a+b/c"));
        assert_eq!(percent_decode("a+b", true).as_deref(), Some("a b"));
        assert_eq!(percent_decode("%e2%82%ac", true).as_deref(), Some("€"));
        assert_eq!(percent_decode("%ff", true), None);
        assert_eq!(percent_decode("%4", true), None);
    }
}
