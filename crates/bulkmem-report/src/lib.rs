//! What the `bulkmem` command prints and writes, apart from the command as
//! ripgrep keeps its output in grep-printer: result rows and their JSON
//! documents, the tables (text, Markdown, CSV), charts, the statistics of
//! repeated runs, and `compare`'s reading and judging of two documents.
//! It knows nothing of how the figures were measured.

pub mod chart;
pub mod compare;
pub mod document;
pub mod row_csv;
pub mod size;
pub mod stats;
pub mod table;
pub mod write_file;
