//! A small HTTP/1.1 client for DynamoDB's JSON API: one request at a time per connection, on
//! a pool of kept-alive connections (plain TCP, or TLS with the system's trusted roots).
//!
//! A request is written with one write and read back into the connection's own buffer, in the
//! task that made it: no connection task, channel or header map in between. DynamoDB replies
//! with `Content-Length` bodies; chunked bodies and bodies closed by the server are read too.
//! A connection is reused only after a complete, framed reply. A request whose future is
//! dropped (a timeout) drops its connection with it, so a late reply can never be read as the
//! answer to another request.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// Idle connections older than this are closed rather than reused: servers and load
/// balancers drop quiet connections after a while, and a request sent on one that is being
/// dropped gets no answer.
const IDLE_TIMEOUT: Duration = Duration::from_secs(20);

/// At most this many idle connections are kept per client (and as many again for its
/// heartbeats); more are closed after use.
const MAX_IDLE: usize = 64;

/// At most this many requests of one client are on the wire at once; more wait for one to
/// finish. A burst (thousands of locks released together) then reuses connections instead
/// of opening one per request and running out of file descriptors or ports.
const MAX_CONNECTIONS: usize = 128;

/// Replies larger than this are refused (a lock item's reply is well under 1 KiB).
const MAX_REPLY: usize = 1 << 20;

/// A connection's read buffer starts with this much room and is cut back to it after a large
/// reply.
const BUFFER: usize = 2048;

/// Why a request got no reply.
#[derive(Debug)]
pub enum WireError {
    /// No connection could be made: the request was never sent.
    Connect(String),
    /// The connection could not be made in time: the request was never sent.
    ConnectTimeout,
    /// The request was (perhaps partly) sent, but no complete reply came back.
    Exchange(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Connect(m) => write!(f, "Could not connect to DynamoDB: {m}"),
            WireError::ConnectTimeout => f.write_str("Could not connect to DynamoDB in time"),
            WireError::Exchange(m) => write!(f, "No complete reply from DynamoDB: {m}"),
        }
    }
}

/// A reply: its status, its `Date` header (for clock-skew errors) and its body.
pub struct Reply {
    pub status: u16,
    pub date: Option<String>,
    pub body: Vec<u8>,
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

struct Conn {
    stream: Stream,
    buf: Vec<u8>,
    idle_since: Instant,
}

impl Conn {
    /// Whether the server closed (or wrote on) this idle connection. Tokio remembers the
    /// socket's readiness, so for a quiet connection this costs no system call.
    fn is_dead(&mut self) -> bool {
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        let mut byte = [0u8; 1];
        let mut rb = ReadBuf::new(&mut byte);
        !matches!(Pin::new(&mut self.stream).poll_read(&mut cx, &mut rb), Poll::Pending)
    }
}

struct Tls {
    connector: TlsConnector,
    name: ServerName<'static>,
}

/// Connections to one endpoint.
pub struct Wire {
    host: String,
    port: u16,
    tls: Option<Tls>,
    connect_timeout: Duration,
    /// Idle connections by the runtime they belong to (see `keep_connections_apart`).
    idle: [Mutex<VecDeque<Conn>>; 2],
    slots: tokio::sync::Semaphore,
}

thread_local! {
    static POOL: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A connection belongs to the runtime whose thread opened it: that runtime's reactor tells
/// it when a reply arrives. A thread that drives its own runtime (the heartbeat scheduler's)
/// calls this once so that its requests use, and keep, connections of their own.
pub fn keep_connections_apart() {
    POOL.with(|p| p.set(1));
}

impl Wire {
    /// `scheme` is `http` or `https`; `host` may be a name, an IPv4 address or a bracketed
    /// IPv6 address. `roots` replaces the system's trusted roots (tests).
    pub fn new(
        scheme: &str,
        host: &str,
        port: u16,
        connect_timeout: Duration,
        roots: Option<rustls::RootCertStore>,
    ) -> Result<Wire, String> {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        let tls = match scheme {
            "http" => None,
            "https" => {
                let config = match roots {
                    Some(roots) => Arc::new(tls_config(roots)?),
                    None => system_tls_config()?,
                };
                let name = ServerName::try_from(host.clone())
                    .map_err(|e| format!("{host:?} is not a TLS server name: {e}"))?;
                Some(Tls {
                    connector: TlsConnector::from(config),
                    name,
                })
            }
            other => return Err(format!("unsupported scheme {other:?}")),
        };
        Ok(Wire {
            host,
            port,
            tls,
            connect_timeout,
            idle: Default::default(),
            slots: tokio::sync::Semaphore::new(MAX_CONNECTIONS),
        })
    }

    #[cfg(test)]
    fn with_max_connections(mut self, n: usize) -> Self {
        self.slots = tokio::sync::Semaphore::new(n);
        self
    }

    /// Sends `request` (a whole HTTP/1.1 request, head and body) and reads the reply.
    pub async fn send(&self, request: &[u8]) -> Result<Reply, WireError> {
        // The semaphore is never closed.
        let _slot = self.slots.acquire().await.ok();
        let mut conn = match self.checkout() {
            Some(c) => c,
            // Boxed: connecting (name lookup, TLS) takes a large future that reused
            // connections, the usual case, need not carry.
            None => Box::pin(self.connect()).await?,
        };
        let (reply, reusable) = exchange(&mut conn, request)
            .await
            .map_err(|e| WireError::Exchange(e.to_string()))?;
        if reusable {
            self.checkin(conn);
        }
        Ok(reply)
    }

    fn idle(&self) -> &Mutex<VecDeque<Conn>> {
        &self.idle[POOL.with(std::cell::Cell::get)]
    }

    fn checkout(&self) -> Option<Conn> {
        let mut idle = self.idle().lock().unwrap_or_else(|p| p.into_inner());
        // The most recently used first: the others age out when fewer are needed.
        while let Some(mut c) = idle.pop_back() {
            if c.idle_since.elapsed() < IDLE_TIMEOUT && !c.is_dead() {
                return Some(c);
            }
        }
        None
    }

    fn checkin(&self, mut conn: Conn) {
        let now = Instant::now();
        conn.idle_since = now;
        conn.buf.clear();
        if conn.buf.capacity() > 4 * BUFFER {
            conn.buf.shrink_to(BUFFER);
        }
        let mut idle = self.idle().lock().unwrap_or_else(|p| p.into_inner());
        while idle
            .front()
            .is_some_and(|c| now.saturating_duration_since(c.idle_since) >= IDLE_TIMEOUT)
        {
            idle.pop_front();
        }
        if idle.len() < MAX_IDLE {
            idle.push_back(conn);
        }
    }

    async fn connect(&self) -> Result<Conn, WireError> {
        let open = async {
            let tcp = TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|e| WireError::Connect(format!("{}:{}: {e}", self.host, self.port)))?;
            // Requests are written whole: nothing is gained by waiting for more.
            tcp.set_nodelay(true).map_err(|e| WireError::Connect(e.to_string()))?;
            Ok(match &self.tls {
                None => Stream::Plain(tcp),
                Some(t) => Stream::Tls(Box::new(
                    t.connector
                        .connect(t.name.clone(), tcp)
                        .await
                        .map_err(|e| WireError::Connect(format!("TLS with {}: {e}", self.host)))?,
                )),
            })
        };
        let stream = tokio::time::timeout(self.connect_timeout, open)
            .await
            .map_err(|_| WireError::ConnectTimeout)??;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(BUFFER),
            idle_since: Instant::now(),
        })
    }
}

/// Writes the request and reads one reply. Returns whether the connection may carry another.
async fn exchange(conn: &mut Conn, request: &[u8]) -> io::Result<(Reply, bool)> {
    conn.stream.write_all(request).await?;
    conn.stream.flush().await?;
    conn.buf.clear();
    let head = loop {
        if let Some(head) = parse_head(&conn.buf)? {
            if (100..200).contains(&head.status) {
                // An interim reply (`100 Continue`): the real one follows.
                conn.buf.drain(..head.len);
                continue;
            }
            break head;
        }
        if read_more(conn).await? == 0 {
            return Err(cut_short("the connection closed before the reply"));
        }
    };
    let mut reusable = !head.close;
    let body = match head.framing {
        Framing::Length(n) => {
            if n > MAX_REPLY {
                return Err(bad("the reply is too large"));
            }
            while conn.buf.len() < head.len + n {
                if read_more(conn).await? == 0 {
                    return Err(cut_short("the connection closed in the reply's body"));
                }
            }
            // Nothing may follow a reply to the only request in flight.
            reusable &= conn.buf.len() == head.len + n;
            conn.buf[head.len..head.len + n].to_vec()
        }
        Framing::Chunked => loop {
            match dechunk(&conn.buf[head.len..])? {
                Some((body, used)) => {
                    reusable &= head.len + used == conn.buf.len();
                    break body;
                }
                None => {
                    if read_more(conn).await? == 0 {
                        return Err(cut_short("the connection closed in the reply's body"));
                    }
                }
            }
        },
        Framing::UntilClose => {
            reusable = false;
            while read_more(conn).await? > 0 {}
            conn.buf[head.len..].to_vec()
        }
        Framing::None => Vec::new(),
    };
    Ok((
        Reply {
            status: head.status,
            date: head.date,
            body,
        },
        reusable,
    ))
}

/// Reads what is there into the connection's buffer; 0 at the end of the stream.
async fn read_more(conn: &mut Conn) -> io::Result<usize> {
    if conn.buf.len() >= MAX_REPLY {
        return Err(bad("the reply is too large"));
    }
    if conn.buf.capacity() - conn.buf.len() < 512 {
        conn.buf.reserve(conn.buf.capacity().max(BUFFER));
    }
    conn.stream.read_buf(&mut conn.buf).await
}

fn cut_short(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, what.to_string())
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

#[derive(Debug, PartialEq)]
enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
    None,
}

#[derive(Debug)]
struct Head {
    len: usize,
    status: u16,
    framing: Framing,
    close: bool,
    date: Option<String>,
}

/// The reply's head, once all of it is in `buf`.
fn parse_head(buf: &[u8]) -> io::Result<Option<Head>> {
    let mut headers = [httparse::EMPTY_HEADER; 48];
    let mut r = httparse::Response::new(&mut headers);
    let len = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > 64 * 1024 => return Err(bad("the reply's head is too large")),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(bad(&format!("the reply is not HTTP/1.1: {e}"))),
    };
    let status = r.code.unwrap_or(0);
    let mut framing = None;
    let mut close = r.version == Some(0);
    let mut date = None;
    for h in r.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or_else(|| bad("the reply's Content-Length is not a number"))?;
            if framing.is_some_and(|f| f != Framing::Length(n)) {
                return Err(bad("the reply's length is given twice"));
            }
            framing = Some(Framing::Length(n));
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            let chunked = std::str::from_utf8(h.value).is_ok_and(|v| {
                v.rsplit(',')
                    .next()
                    .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
            });
            if !chunked {
                return Err(bad("the reply's transfer encoding is not chunked"));
            }
            // Chunked framing wins over a length.
            framing = Some(Framing::Chunked);
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = String::from_utf8_lossy(h.value);
            if v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")) {
                close = true;
            } else if v.split(',').any(|t| t.trim().eq_ignore_ascii_case("keep-alive")) {
                close = false;
            }
        } else if h.name.eq_ignore_ascii_case("date") {
            date = std::str::from_utf8(h.value).ok().map(str::to_string);
        }
    }
    let framing = match framing {
        _ if status == 204 || status == 304 || (100..200).contains(&status) => Framing::None,
        Some(f) => f,
        None => Framing::UntilClose,
    };
    Ok(Some(Head {
        len,
        status,
        framing,
        close,
        date,
    }))
}

/// A chunked body, once all of it is in `buf`: the body and the bytes it took.
fn dechunk(buf: &[u8]) -> io::Result<Option<(Vec<u8>, usize)>> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let Some(eol) = find_crlf(&buf[at..]) else {
            return Ok(None);
        };
        let line = std::str::from_utf8(&buf[at..at + eol]).map_err(|_| bad("a chunk size is not text"))?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| bad("a chunk size is not a number"))?;
        at += eol + 2;
        if size == 0 {
            // Trailers, then an empty line.
            loop {
                let Some(eol) = find_crlf(&buf[at..]) else {
                    return Ok(None);
                };
                at += eol + 2;
                if eol == 0 {
                    return Ok(Some((body, at)));
                }
            }
        }
        if size > MAX_REPLY || body.len() + size > MAX_REPLY {
            return Err(bad("the reply is too large"));
        }
        if buf.len() < at + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&buf[at..at + size]);
        if &buf[at + size..at + size + 2] != b"\r\n" {
            return Err(bad("a chunk does not end where its size says"));
        }
        at += size + 2;
    }
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

fn tls_config(roots: rustls::RootCertStore) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// TLS with the system's trusted roots, loaded once per process.
fn system_tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err("no trusted root certificates were found on this system".into());
            }
            tls_config(roots).map(Arc::new)
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[test]
    fn heads_give_status_framing_and_date() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nDate: Mon, 23 Nov 2026 10:00:00 GMT\r\n\r\n{}")
            .unwrap()
            .unwrap();
        assert_eq!((h.status, h.framing, h.close), (200, Framing::Length(2), false));
        assert_eq!(h.date.as_deref(), Some("Mon, 23 Nov 2026 10:00:00 GMT"));
        let h = parse_head(b"HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((h.status, h.framing, h.close), (400, Framing::Chunked, true));
        let h = parse_head(b"HTTP/1.0 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.framing, h.close), (Framing::UntilClose, true));
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap().is_none());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").is_err());
        assert!(parse_head(b"SMTP ready\r\n\r\n").is_err());
    }

    #[test]
    fn chunked_bodies_are_joined_once_complete() {
        let whole = b"4;ext=1\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\nX-Trailer: y\r\n\r\nrest";
        let (body, used) = dechunk(whole).unwrap().unwrap();
        assert_eq!(body, b"{\"a\":1}");
        assert_eq!(&whole[used..], b"rest");
        for cut in 0..whole.len() - 4 {
            assert!(dechunk(&whole[..cut]).unwrap().is_none(), "complete at {cut}?");
        }
        assert!(dechunk(b"zz\r\n").is_err());
        assert!(dechunk(b"2\r\nabcd\r\n").is_err());
    }

    /// A server on 127.0.0.1 that answers each connection's requests with `replies` in turn
    /// (one per request), then closes it. Returns its port and the number of connections.
    async fn server(replies: Vec<Vec<u8>>) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let replies = replies.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    for reply in replies {
                        let mut got = Vec::new();
                        // A request of this test ends with its 2-byte body "{}".
                        while !got.ends_with(b"\r\n\r\n{}") {
                            match s.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => got.extend_from_slice(&buf[..n]),
                            }
                        }
                        if s.write_all(&reply).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (port, accepted)
    }

    const REQUEST: &[u8] = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";

    fn wire(port: u16) -> Wire {
        Wire::new("http", "127.0.0.1", port, Duration::from_secs(2), None).unwrap()
    }

    #[tokio::test]
    async fn a_connection_is_kept_for_the_next_request() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".to_vec();
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n[\r\n1\r\n]\r\n0\r\n\r\n".to_vec();
        let (port, accepted) = server(vec![ok.clone(), chunked, ok]).await;
        let w = wire(port);
        for want in [&b"{}"[..], b"[]", b"{}"] {
            let r = w.send(REQUEST).await.unwrap();
            assert_eq!((r.status, r.body.as_slice()), (200, want));
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_closed_connection_is_not_reused() {
        // The server answers once per connection and closes it; the client must notice.
        let (port, accepted) = server(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".to_vec()]).await;
        let w = wire(port);
        for _ in 0..3 {
            w.send(REQUEST).await.unwrap();
            // Let the server's close reach the client.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn connection_close_and_unframed_replies_end_the_connection() {
        let close = b"HTTP/1.1 500 Oops\r\nContent-Length: 1\r\nConnection: close\r\n\r\n!".to_vec();
        let (port, accepted) = server(vec![close]).await;
        let w = wire(port);
        assert_eq!(w.send(REQUEST).await.unwrap().status, 500);
        assert_eq!(w.send(REQUEST).await.unwrap().status, 500);
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_reply_cut_short_is_an_exchange_error() {
        let (port, _) = server(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}".to_vec()]).await;
        match wire(port).send(REQUEST).await {
            Err(WireError::Exchange(m)) => assert!(m.contains("closed"), "{m}"),
            other => panic!("expected an exchange error, got {:?}", other.map(|r| r.status)),
        }
    }

    #[tokio::test]
    async fn tls_connections_check_the_server_and_are_kept() {
        let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let cert = certified.cert.der().clone();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let server_config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut s) = acceptor.accept(tcp).await else { return };
                    let mut buf = vec![0u8; 8192];
                    let mut got = Vec::new();
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                        while let Some(end) = got.windows(6).position(|w| w == b"\r\n\r\n{}") {
                            got.drain(..end + 6);
                            let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
                            if s.write_all(reply).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let w = Wire::new("https", "127.0.0.1", port, Duration::from_secs(2), Some(roots)).unwrap();
        for _ in 0..3 {
            let r = w.send(REQUEST).await.unwrap();
            assert_eq!((r.status, r.body.as_slice()), (200, &b"{\"a\":1}"[..]));
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
        // A client that does not trust the server's certificate never sends the request.
        let untrusting = Wire::new(
            "https",
            "127.0.0.1",
            port,
            Duration::from_secs(2),
            Some(rustls::RootCertStore::empty()),
        )
        .unwrap();
        match untrusting.send(REQUEST).await {
            Err(WireError::Connect(m)) => assert!(m.contains("TLS"), "{m}"),
            other => panic!("expected a TLS connect error, got {:?}", other.map(|r| r.status)),
        }
    }

    #[tokio::test]
    async fn a_burst_of_requests_shares_the_allowed_connections() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".to_vec();
        let (port, accepted) = server(vec![ok; 20]).await;
        let w = wire(port).with_max_connections(3);
        let all = futures_util::future::join_all((0..20).map(|_| w.send(REQUEST))).await;
        assert!(all.iter().all(|r| r.as_ref().is_ok_and(|r| r.status == 200)));
        let opened = accepted.load(std::sync::atomic::Ordering::SeqCst);
        assert!((1..=3).contains(&opened), "{opened} connections for at most 3 at once");
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        assert!(matches!(wire(port).send(REQUEST).await, Err(WireError::Connect(_))));
    }
}
