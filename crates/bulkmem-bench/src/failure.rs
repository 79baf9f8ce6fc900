//! How a command fails: a message and the exit code it deserves
//! (docs/design.md, "Exit codes"). Below every other module, so that the
//! output path (`out`) and the commands can all name it.

/// A failure, with the exit code it deserves: [`usage`] (2) for what is
/// wrong with the command line and is found before anything runs (flags,
/// values, output paths that cannot be written, input files that cannot
/// be read), [`runtime`] (1) for what goes wrong while it runs. The man
/// page's EXIT STATUS (`generate::EXIT_STATUS`) lists every code.
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
