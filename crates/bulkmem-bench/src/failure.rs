//! How a command fails: a message and the exit code it deserves
//! (docs/cli-contract.md, "Exit codes"). Below every other module, so that the
//! output path (`out`) and the commands can all name it.

/// A failure, with the exit code it deserves: [`usage`] (2) for bad
/// input, what is wrong with the command line or the files it names and is
/// found before anything runs (flags, values, output paths that cannot be
/// written, input files that cannot be read or are not what the command
/// reads), [`runtime`] (1) for a failure of what is measured or run (a
/// measurement or system call that fails, a program under `run --compare`
/// that fails, a `compare --fail-on` gate). The man page's EXIT STATUS
/// (`generate::EXIT_STATUS`) lists every code.
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
