//! The config file, watched: a look at its metadata every [`POLL`], following symlinks.
//!
//! A poll, not inotify: one `stat` a second costs nothing, needs no C library and no crate,
//! and sees every way a file is replaced with one rule — written in place (its size or
//! modification time), replaced by an editor's rename or a `mv` (its inode), a symlink swapped
//! the way Kubernetes updates a mounted ConfigMap (`..data` pointed at a new directory: the path
//! now resolves to another inode), a file on a network share (where inotify hears nothing). A
//! change is reported once the file has stayed the same for [`SETTLE`] (an editor that writes
//! in several steps is one change), so a reload starts at most `POLL + SETTLE` after the last
//! write. A file that is gone is said once, and waited for: the running config is kept.
//!
//! The reloader compares the content with the last it read: a `touch`, or a ConfigMap synced
//! again with the same text, reloads nothing.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How often the file is looked at.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// How long a changed file must stay the same before the change is reported.
pub(crate) const SETTLE: Duration = Duration::from_millis(200);

/// What a look at the file sees: enough to tell any replacement or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    /// Device and inode (a replaced file, a swapped symlink), and the status change time.
    #[cfg(unix)]
    id: (u64, u64, i64, i64),
}

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    // `metadata` follows symlinks: a swapped link shows as the file it now points at.
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    use std::os::unix::fs::MetadataExt as _;
    Some(Stamp {
        len: m.len(),
        modified: m.modified().ok(),
        #[cfg(unix)]
        id: (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()),
    })
}

/// The config file, watched.
#[derive(Debug)]
pub(crate) struct FileWatch {
    path: PathBuf,
    seen: Option<Stamp>,
}

impl FileWatch {
    /// Watches `path` from what it is now.
    pub(crate) fn new(path: PathBuf) -> Self {
        let seen = stamp(&path);
        Self { path, seen }
    }

    /// Waits until the file changed (and then stayed the same for [`SETTLE`]).
    pub(crate) async fn changed(&mut self) {
        loop {
            tokio::time::sleep(POLL).await;
            let mut now = stamp(&self.path);
            if now == self.seen {
                continue;
            }
            loop {
                tokio::time::sleep(SETTLE).await;
                let again = stamp(&self.path);
                if again == now {
                    break;
                }
                now = again;
            }
            let was_there = self.seen.is_some();
            self.seen = now;
            match (was_there, now.is_some()) {
                (_, true) => return,
                (true, false) => tracing::warn!(
                    "the config file {} is gone: the gateway keeps the config it runs, and \
                     reloads when the file is back",
                    self.path.display()
                ),
                (false, false) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the watcher compares tells each kind of replacement from no change.
    #[test]
    fn a_write_a_rename_and_a_symlink_swap_each_change_the_stamp() {
        let dir = std::env::temp_dir().join(format!("gw-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::create_dir_all(dir.join("b")).unwrap();
        let file = dir.join("gw.json");
        std::fs::write(&file, "{}").unwrap();
        let first = stamp(&file);
        assert!(first.is_some());
        assert_eq!(stamp(&file), first, "no change, the same stamp");
        // Written in place, one byte longer.
        std::fs::write(&file, "{ }").unwrap();
        let written = stamp(&file);
        assert_ne!(written, first);
        // Replaced by a rename (an editor's save), same length.
        let tmp = dir.join("gw.json.tmp");
        std::fs::write(&tmp, "{ }").unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        assert_ne!(stamp(&file), written);
        #[cfg(unix)]
        {
            // A ConfigMap's layout: gw.json -> data/gw.json, data -> a (then b).
            std::fs::write(dir.join("a/gw.json"), "{}").unwrap();
            std::fs::write(dir.join("b/gw.json"), "{}").unwrap();
            std::os::unix::fs::symlink("a", dir.join("data")).unwrap();
            let linked = dir.join("linked.json");
            std::os::unix::fs::symlink("data/gw.json", &linked).unwrap();
            let before = stamp(&linked);
            std::os::unix::fs::symlink("b", dir.join("data.new")).unwrap();
            std::fs::rename(dir.join("data.new"), dir.join("data")).unwrap();
            assert_ne!(
                stamp(&linked),
                before,
                "the swapped link points at another file"
            );
        }
        std::fs::remove_file(&file).unwrap();
        assert_eq!(stamp(&file), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
