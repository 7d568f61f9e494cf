//! The host's stdin and stdout as the stdio transport reads and writes them.
//!
//! tokio's `stdin()` and `stdout()` hand every read and every write to a thread of the blocking
//! pool: a message from the host crosses one thread more before the gateway sees it, and each
//! answer two (its write, then its flush). Over stdio that was 13 % of the gateway's samples in
//! the blocking pool and 6 % more waking it, and a p50 1.32× a pass-through proxy's (0.99× with
//! this module; BENCHMARKS.md, issue 30). What hosts give an MCP server is a pipe (Python's
//! `asyncio`, rmcp, most launchers) or a Unix socket (Node's `child_process`, so the TypeScript
//! SDK's hosts): those are read and written here through the runtime's reactor, set to
//! non-blocking while the gateway serves them and set back when it stops. Anything else (a
//! terminal, a file) keeps tokio's blocking `stdin()`/`stdout()`, and so does stdout when stderr
//! is the same pipe or socket (the log must never meet a full pipe as `EAGAIN`).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::unix::pipe;
use tokio::net::UnixStream;

/// The host's side of one of the gateway's standard streams.
enum Stream<P: Restore, S> {
    /// A pipe, through the reactor.
    Pipe(P),
    /// A socket, through the reactor.
    Socket(UnixStream),
    /// Anything else, through tokio's blocking stream.
    Std(S),
    /// Given back (dropped).
    Gone,
}

impl<P: Restore, S> Stream<P, S> {
    /// How the log names it.
    fn what(&self) -> &'static str {
        match self {
            Stream::Pipe(_) => "a pipe, through the reactor",
            Stream::Socket(_) => "a socket, through the reactor",
            Stream::Std(_) => "a blocking stream, through tokio's blocking threads",
            Stream::Gone => "nothing",
        }
    }
}

/// The host's stdin.
pub(crate) struct HostIn(Stream<pipe::Receiver, tokio::io::Stdin>);

/// The host's stdout.
pub(crate) struct HostOut(Stream<pipe::Sender, tokio::io::Stdout>);

/// What a standard stream is.
enum Kind {
    Pipe(OwnedFd),
    Socket(OwnedFd),
    Other,
}

/// The file behind `fd`: its kind (with a copy of the descriptor), and its device and inode.
fn kind(fd: BorrowedFd<'_>) -> (Kind, Option<(u64, u64)>) {
    let Ok(copy) = fd.try_clone_to_owned() else {
        return (Kind::Other, None);
    };
    let file = std::fs::File::from(copy);
    let Ok(meta) = file.metadata() else {
        return (Kind::Other, None);
    };
    let id = Some((meta.dev(), meta.ino()));
    let t = meta.file_type();
    let copy = OwnedFd::from(file);
    if t.is_fifo() {
        (Kind::Pipe(copy), id)
    } else if t.is_socket() {
        (Kind::Socket(copy), id)
    } else {
        (Kind::Other, id)
    }
}

/// A socket's descriptor as a tokio stream (non-blocking from now on).
fn socket(fd: OwnedFd) -> io::Result<UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true)?;
    UnixStream::from_std(std)
}

impl HostIn {
    /// The process's stdin (within the runtime: a pipe or socket registers with its reactor).
    pub(crate) fn open() -> Self {
        Self::reading(io::stdin().as_fd())
    }

    /// `fd` (a copy of it) read as the host's stdin when it is a pipe or a socket; anything
    /// else reads the process's stdin through tokio.
    fn reading(fd: BorrowedFd<'_>) -> Self {
        let stream = match kind(fd).0 {
            Kind::Pipe(fd) => pipe::Receiver::from_owned_fd(fd).map(Stream::Pipe),
            Kind::Socket(fd) => socket(fd).map(Stream::Socket),
            Kind::Other => Ok(Stream::Std(tokio::io::stdin())),
        };
        let stream = stream.unwrap_or_else(|_| Stream::Std(tokio::io::stdin()));
        tracing::debug!("stdin read as {}", stream.what());
        Self(stream)
    }
}

impl HostOut {
    /// The process's stdout (within the runtime: a pipe or socket registers with its reactor,
    /// unless stderr is the same file).
    pub(crate) fn open() -> Self {
        Self::writing(io::stdout().as_fd(), io::stderr().as_fd())
    }

    /// `fd` (a copy of it) written as the host's stdout when it is a pipe or a socket other than
    /// `log` (the log's descriptor); anything else writes the process's stdout through tokio.
    fn writing(fd: BorrowedFd<'_>, log: BorrowedFd<'_>) -> Self {
        let (kind, id) = kind(fd);
        let shared_with_log = id.is_some() && kind_id(log) == id;
        let stream = match kind {
            _ if shared_with_log => Ok(Stream::Std(tokio::io::stdout())),
            Kind::Pipe(fd) => pipe::Sender::from_owned_fd(fd).map(Stream::Pipe),
            Kind::Socket(fd) => socket(fd).map(Stream::Socket),
            Kind::Other => Ok(Stream::Std(tokio::io::stdout())),
        };
        let stream = stream.unwrap_or_else(|_| Stream::Std(tokio::io::stdout()));
        tracing::debug!("stdout written as {}", stream.what());
        Self(stream)
    }
}

fn kind_id(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
    kind(fd).1
}

/// Puts a descriptor back in blocking mode: whoever shares it after the gateway (a launcher
/// that did not `exec` it) reads and writes it as before.
trait Restore {
    fn restore(self);
}

impl Restore for pipe::Receiver {
    fn restore(self) {
        let _ = self.into_blocking_fd();
    }
}

impl Restore for pipe::Sender {
    fn restore(self) {
        let _ = self.into_blocking_fd();
    }
}

impl<P: Restore, S> Stream<P, S> {
    fn restore(self) {
        match self {
            Stream::Pipe(p) => p.restore(),
            Stream::Socket(s) => {
                if let Ok(s) = s.into_std() {
                    let _ = s.set_nonblocking(false);
                }
            }
            Stream::Std(_) | Stream::Gone => {}
        }
    }
}

impl Drop for HostIn {
    fn drop(&mut self) {
        std::mem::replace(&mut self.0, Stream::Gone).restore();
    }
}

impl Drop for HostOut {
    fn drop(&mut self) {
        std::mem::replace(&mut self.0, Stream::Gone).restore();
    }
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the stream was closed")
}

impl AsyncRead for HostIn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            Stream::Pipe(p) => Pin::new(p).poll_read(cx, buf),
            Stream::Socket(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Std(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Gone => Poll::Ready(Err(gone())),
        }
    }
}

impl AsyncWrite for HostOut {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().0 {
            Stream::Pipe(p) => Pin::new(p).poll_write(cx, buf),
            Stream::Socket(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Std(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Gone => Poll::Ready(Err(gone())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            Stream::Pipe(p) => Pin::new(p).poll_flush(cx),
            Stream::Socket(s) => Pin::new(s).poll_flush(cx),
            Stream::Std(s) => Pin::new(s).poll_flush(cx),
            Stream::Gone => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            Stream::Pipe(p) => Pin::new(p).poll_shutdown(cx),
            Stream::Socket(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Std(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Gone => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn nonblocking(fd: BorrowedFd<'_>) -> bool {
        let flags = fcntl(fd, FcntlArg::F_GETFL).expect("F_GETFL");
        OFlag::from_bits_truncate(flags).contains(OFlag::O_NONBLOCK)
    }

    #[tokio::test]
    async fn a_pipe_goes_through_the_reactor_and_is_given_back_blocking() {
        let (host_reads, we_write) = io::pipe().expect("pipe");
        let (we_read, host_writes) = io::pipe().expect("pipe");
        let log = io::pipe().expect("pipe").1;
        let mut input = HostIn::reading(we_read.as_fd());
        let mut output = HostOut::writing(we_write.as_fd(), log.as_fd());
        assert!(matches!(input.0, Stream::Pipe(_)), "{}", input.0.what());
        assert!(matches!(output.0, Stream::Pipe(_)), "{}", output.0.what());
        // Non-blocking while served (the flag belongs to the pipe, shared with the host's copy).
        assert!(nonblocking(we_read.as_fd()) && nonblocking(we_write.as_fd()));

        std::io::Write::write_all(&mut &host_writes, b"ping\n").expect("host writes");
        let mut got = [0u8; 5];
        input.read_exact(&mut got).await.expect("read");
        assert_eq!(&got, b"ping\n");
        output.write_all(b"pong\n").await.expect("write");
        output.flush().await.expect("flush");
        let mut answer = [0u8; 5];
        std::io::Read::read_exact(&mut &host_reads, &mut answer).expect("host reads");
        assert_eq!(&answer, b"pong\n");

        // Whoever shares them after the gateway reads and writes them blocking, as before.
        drop((input, output));
        assert!(!nonblocking(we_read.as_fd()) && !nonblocking(we_write.as_fd()));
    }

    #[tokio::test]
    async fn stdout_shared_with_the_log_stays_on_tokios_blocking_stream() {
        let (_host_reads, we_write) = io::pipe().expect("pipe");
        let output = HostOut::writing(we_write.as_fd(), we_write.as_fd());
        assert!(matches!(output.0, Stream::Std(_)), "{}", output.0.what());
        assert!(!nonblocking(we_write.as_fd()));
    }
}
