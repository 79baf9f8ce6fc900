//! The pipe regime's next user of a destination: a pipe that a thread of
//! its own drains, as a server's socket is drained by its client. Writing
//! into it makes the kernel read the whole destination (copy_from_user
//! into pipe pages) on the copying thread, which is what redis pays when
//! it sends the value it has just copied.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::thread::JoinHandle;

/// Pipe capacity asked for (best effort: `pipe-max-size` may refuse it,
/// then the default 64 KiB serves, with more wake-ups).
const CAPACITY: libc::c_int = 1 << 20;

/// A pipe whose reader thread discards what arrives until the write end
/// is dropped.
pub struct PipeSink {
    write: Option<File>,
    reader: Option<JoinHandle<std::io::Result<u64>>>,
}

impl PipeSink {
    pub fn new() -> Result<PipeSink, String> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is an array of two ints for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(format!(
                "cannot create the pipe regime's pipe: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: pipe2 succeeded: both descriptors are open and owned by
        // nobody else.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: F_SETPIPE_SZ takes an int and touches nothing of ours;
        // failure leaves the default size, which still works.
        let _ = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, CAPACITY) };
        let reader = std::thread::Builder::new()
            .name("bench-pipe-reader".into())
            .spawn(move || {
                let mut from = File::from(r);
                let mut buf = vec![0u8; CAPACITY as usize];
                let mut total = 0u64;
                loop {
                    match from.read(&mut buf) {
                        Ok(0) => return Ok(total),
                        Ok(n) => total += n as u64,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            })
            .map_err(|e| format!("cannot start the pipe regime's reader: {e}"))?;
        Ok(PipeSink {
            write: Some(File::from(w)),
            reader: Some(reader),
        })
    }

    /// Writes all of `bytes` into the pipe (returns once the last byte is
    /// in it, not when it has been read).
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        match self.write.as_mut() {
            Some(w) => w
                .write_all(bytes)
                .map_err(|e| format!("cannot write to the pipe regime's pipe: {e}")),
            None => Err("the pipe regime's pipe is closed".into()),
        }
    }
}

impl Drop for PipeSink {
    fn drop(&mut self) {
        // Closing the write end ends the reader's loop.
        drop(self.write.take());
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_sent_reaches_the_reader() {
        let mut s = PipeSink::new().unwrap();
        let data = vec![7u8; 3 << 20];
        s.send(&data).unwrap();
        s.send(&data[..5]).unwrap();
        drop(s.write.take());
        let got = s.reader.take().unwrap().join().unwrap().unwrap();
        assert_eq!(got, (3 << 20) + 5);
    }
}
