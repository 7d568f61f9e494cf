//! A stdio upstream's processes: started in a process group of its own, stopped as a group,
//! gently first, so that nothing of an upstream outlives it.
//!
//! Launchers (`npx`, `uvx`, `sh -c`, `docker run`) start the server as a child of their own;
//! killing the launcher alone leaves the server running, reparented, holding whatever it held.
//! So every stdio upstream is the leader of a new process group (`setpgid(0, 0)` in the child),
//! and [`Group::stop`] stops the whole group, the way the MCP specification's stdio shutdown
//! says, one step more each time something is still there:
//!
//! 1. its stdin is closed (the caller drops the transport first): a server ends at end of input;
//! 2. after [`GRACE`], `SIGTERM` to the group;
//! 3. after [`GRACE`] again, `SIGKILL` to the group.
//!
//! Whatever is left of the group once the leader exited (a child that outlived its launcher)
//! gets the same `SIGTERM`, then `SIGKILL`. A [`Group`] dropped without `stop` (the gateway
//! ends abruptly) kills its group at once. The leader is reaped last: the group's id stays its
//! process id, and Linux hands process ids out in turn, so no other group can take that id in
//! the instants between the last signal and the reaping.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// How long each gentle step may take before the next, harder one.
pub(super) const GRACE: Duration = Duration::from_secs(2);

/// How often a group is looked at while it empties.
const POLL: Duration = Duration::from_millis(20);

/// A started upstream: its group and its pipes.
pub(super) struct Spawned {
    pub(super) group: Group,
    pub(super) stdin: ChildStdin,
    pub(super) stdout: ChildStdout,
    pub(super) stderr: ChildStderr,
}

/// Starts `command` with `args`, `env` (over the gateway's own environment) and `cwd`, as the
/// leader of a new process group, its stdio piped. The reason on `Err` names what is wrong (a
/// missing `cwd` is said so, not blamed on the command).
pub(super) fn spawn(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&Path>,
) -> Result<Spawned, String> {
    if let Some(dir) = cwd {
        if !dir.is_dir() {
            return Err(format!(
                "its `cwd` {} is not a directory that exists; `{command}` was not started",
                dir.display()
            ));
        }
    }
    let mut cmd = Command::new(command);
    cmd.args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Stopped by `Group` (gently first), never by tokio's drop alone.
        .kill_on_drop(false);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "`{command}` could not be started: no such program{}",
            if command.contains('/') {
                String::new()
            } else {
                " on the PATH (give its full path in `command`)".to_owned()
            }
        ),
        _ => format!("`{command}` could not be started: {e}"),
    })?;
    let pid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        // Piped above: never happens; stop what was started all the same.
        let group = Group::new(child, pid);
        drop(group);
        return Err(format!("`{command}` started without its pipes"));
    };
    Ok(Spawned {
        group: Group::new(child, pid),
        stdin,
        stdout,
        stderr,
    })
}

/// The processes of one start of a stdio upstream (see the module docs).
pub(super) struct Group {
    child: Child,
    /// The group's id: the leader's process id (`None` once the group is stopped).
    pgid: Option<u32>,
    /// How the leader ended, once reaped.
    status: Option<ExitStatus>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("pgid", &self.pgid)
            .field("status", &self.status)
            .finish()
    }
}

impl Group {
    fn new(child: Child, pid: Option<u32>) -> Self {
        Self {
            child,
            pgid: pid,
            status: None,
        }
    }

    /// The leader's process id.
    pub(super) fn pid(&self) -> Option<u32> {
        self.pgid
    }

    /// How the leader ended, if it did (reaps it when it did).
    pub(super) fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Completes when the leader exits (and reaps it); cancel-safe.
    pub(super) async fn leader_exited(&mut self) {
        if self.status.is_none() {
            self.status = self.child.wait().await.ok();
        }
    }

    /// How the leader ended, waiting at most `timeout` for it to.
    pub(super) async fn exited_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.wait(timeout).await;
        self.status
    }

    /// Stops every process of the group (see the module docs); the caller has closed the
    /// leader's stdin (dropped the transport). How the leader ended, when it could be told.
    pub(super) async fn stop(mut self, grace: Duration) -> Option<ExitStatus> {
        self.wait(grace).await;
        if self.status.is_none() {
            self.signal(Signal::Term);
            self.wait(grace).await;
        } else if self.signal(Signal::Term) {
            // The leader is gone, others of its group are not: the same steps for them.
            self.wait_empty(grace).await;
        }
        self.signal(Signal::Kill);
        if self.status.is_none() {
            self.status = self.child.wait().await.ok();
        }
        self.pgid = None;
        self.status
    }

    /// Waits at most `timeout` for the leader to exit (and reaps it).
    async fn wait(&mut self, timeout: Duration) {
        if self.status.is_some() {
            return;
        }
        if let Ok(Ok(status)) = tokio::time::timeout(timeout, self.child.wait()).await {
            self.status = Some(status);
        }
    }

    /// Waits at most `timeout` until no process of the group is left (the leader reaped).
    async fn wait_empty(&mut self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.signal(Signal::Probe) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sends `signal` to the whole group: whether some process of it was there to get it.
    fn signal(&mut self, signal: Signal) -> bool {
        let Some(pgid) = self.pgid else {
            return false;
        };
        #[cfg(unix)]
        {
            use nix::sys::signal::{killpg, Signal as S};
            use nix::unistd::Pid;
            let Ok(raw) = i32::try_from(pgid) else {
                return false;
            };
            let sig = match signal {
                Signal::Probe => None,
                Signal::Term => Some(S::SIGTERM),
                Signal::Kill => Some(S::SIGKILL),
            };
            killpg(Pid::from_raw(raw), sig).is_ok()
        }
        #[cfg(not(unix))]
        {
            // No process groups: the leader alone.
            match signal {
                Signal::Probe => self.status.is_none(),
                Signal::Term | Signal::Kill => self.child.start_kill().is_ok(),
            }
        }
    }
}

/// What [`Group::signal`] sends.
#[derive(Debug, Clone, Copy)]
enum Signal {
    /// Nothing: is anyone there?
    Probe,
    Term,
    Kill,
}

impl Drop for Group {
    fn drop(&mut self) {
        // Not stopped (the gateway ends abruptly, a task was aborted): no time to be gentle.
        if self.pgid.is_some() {
            self.signal(Signal::Kill);
            let _ = self.child.start_kill();
        }
    }
}
