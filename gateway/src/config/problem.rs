//! A problem in a config file, and the error that lists every problem found.

use std::fmt;

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// The key's path, as written in messages (`health.servers.py.cooldownSeconds`).
    pub(crate) path: String,
    /// Its line, when known.
    pub(crate) line: Option<usize>,
    /// What is wrong, with the accepted range.
    pub(crate) message: String,
    /// What to do about it.
    pub(crate) fix: String,
}

impl Problem {
    /// `file:line: `key` message` (without the line or the key when unknown): how every
    /// message names a problem.
    pub(crate) fn at(&self, file: &str) -> String {
        let line = self.line.map(|l| format!(":{l}")).unwrap_or_default();
        if self.path.is_empty() {
            format!("{file}{line}: {}", self.message)
        } else {
            format!("{file}{line}: `{}` {}", self.path, self.message)
        }
    }
}

/// Why a config could not be used: every problem found, or a file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    pub(crate) file: String,
    pub(crate) problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        writeln!(
            f,
            "{n} problem{} in the config file {}:",
            if n == 1 { "" } else { "s" },
            self.file
        )?;
        for p in &self.problems {
            writeln!(f, "  {}", p.at(&self.file))?;
            writeln!(f, "    fix: {}", p.fix)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}
