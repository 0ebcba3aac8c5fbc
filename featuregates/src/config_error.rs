use std::fmt;

use crate::Problem;

/// Every problem found in the configuration, reported at once.
///
/// Its message lists the problems one per line, each naming the file and
/// key, the environment variable or the flag at fault.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub struct ConfigError {
    /// The problems, in the order they were found.
    pub problems: Vec<Problem>,
}

impl ConfigError {
    pub(crate) fn new(problems: Vec<Problem>) -> Self {
        ConfigError { problems }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.problems.len();
        let noun = if count == 1 { "problem" } else { "problems" };
        write!(f, "invalid concord configuration, {count} {noun}:")?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}
