//! How a command fails: a message and the exit code it deserves
//! (docs/design.md, "Exit codes"). Below every other module, so that the
//! output path (`out`) and the commands can all name it.

/// A failure, with the exit code it deserves (2: bad usage).
pub struct Failure {
    pub code: u8,
    pub msg: String,
}

pub fn usage(msg: impl Into<String>) -> Failure {
    Failure {
        code: 2,
        msg: msg.into(),
    }
}

pub fn runtime(msg: impl Into<String>) -> Failure {
    Failure {
        code: 1,
        msg: msg.into(),
    }
}
