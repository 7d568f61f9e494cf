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
            match p.line {
                Some(line) => write!(f, "  {}:{line}: ", self.file)?,
                None => write!(f, "  {}: ", self.file)?,
            }
            if p.path.is_empty() {
                writeln!(f, "{}", p.message)?;
            } else {
                writeln!(f, "`{}` {}", p.path, p.message)?;
            }
            writeln!(f, "    fix: {}", p.fix)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}
