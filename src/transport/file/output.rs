//! Writing an output file safely: through a temporary file in the output's directory,
//! synced and renamed over the output only when everything was written, and removed on
//! any failure (including an early return or a panic), so a failed write never leaves a
//! half file and readers that have the old file mapped keep theirs. An output that
//! exists and is not a regular file (a device such as `/dev/null`, a FIFO, a socket, or a
//! symlink to one) is written in place: renaming over it would replace the device with a
//! file. A symlink to a regular file is replaced by the new file (the file it pointed to
//! is left as it was); a directory is refused.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

/// Where a writer's output goes when it is given a path: a temporary file beside it,
/// removed on drop unless [`commit`](Self::commit)ted, or the path itself when that is a
/// device, FIFO or socket. The CLI and the Python package write every output file
/// through it.
///
/// ```
/// # fn main() -> tensordesc::Result<()> {
/// use tensordesc::file::{FileWriter, OutputFile};
/// let path = std::env::temp_dir().join(format!("doc-output-{}.tdf", std::process::id()));
/// let mut out = OutputFile::create(&path)?;
/// let w = FileWriter::new(out.take_file().unwrap())?;
/// out.commit(w.finish()?)?;
/// assert_eq!(std::fs::metadata(&path)?.len(), 32);
/// # std::fs::remove_file(&path)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct OutputFile {
    tmp: PathBuf,
    dest: PathBuf,
    file: Option<File>,
    committed: bool,
    /// Writing straight into `dest` (not a regular file): nothing to rename or remove.
    direct: bool,
}

/// The directory an output path lives in (`.` for a bare file name).
fn parent_dir(dest: &Path) -> &Path {
    match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

impl OutputFile {
    /// Create a fresh temporary file in `dest`'s directory. Fails (IO, naming the path) when
    /// `dest` is a directory or its directory cannot be written; nothing is left behind.
    pub fn create(dest: &Path) -> Result<OutputFile> {
        if let Ok(meta) = std::fs::metadata(dest) {
            if meta.is_dir() {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "{} is a directory; give the path of the file to write",
                        dest.display()
                    ),
                ));
            }
            if !meta.is_file() {
                let file = OpenOptions::new().write(true).open(dest).map_err(|e| {
                    Error::new(
                        ErrorKind::Io,
                        format!("cannot write {}: {e}", dest.display()),
                    )
                })?;
                return Ok(OutputFile {
                    tmp: dest.to_path_buf(),
                    dest: dest.to_path_buf(),
                    file: Some(file),
                    committed: false,
                    direct: true,
                });
            }
        }
        let Some(name) = dest.file_name() else {
            return Err(Error::new(
                ErrorKind::Io,
                format!("{} does not name a file", dest.display()),
            ));
        };
        let dir = parent_dir(dest);
        let pid = std::process::id();
        let mut last_err = None;
        for attempt in 0..100u32 {
            let mut tmp_name = std::ffi::OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(format!(".{pid}-{attempt}.partial"));
            let tmp = dir.join(tmp_name);
            match OpenOptions::new().write(true).create_new(true).open(&tmp) {
                Ok(file) => {
                    return Ok(OutputFile {
                        tmp,
                        dest: dest.to_path_buf(),
                        file: Some(file),
                        committed: false,
                        direct: false,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
                Err(e) => {
                    return Err(Error::new(
                        ErrorKind::Io,
                        format!(
                            "cannot write {}: cannot create a file in {}: {e}",
                            dest.display(),
                            dir.display()
                        ),
                    ))
                }
            }
        }
        Err(Error::new(
            ErrorKind::Io,
            format!(
                "cannot write {}: no free temporary name in {} ({})",
                dest.display(),
                dir.display(),
                last_err.map_or_else(String::new, |e| e.to_string())
            ),
        ))
    }

    /// The open file to write (taken once, to hand to a writer).
    pub fn take_file(&mut self) -> Option<File> {
        self.file.take()
    }

    /// The path being written: the temporary file's, or the output's own when it is
    /// written in place.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Whether the output is written in place (a device, FIFO or socket): nothing is
    /// synced or renamed.
    pub fn in_place(&self) -> bool {
        self.direct
    }

    /// Finish with `file`, the file [`take_file`](Self::take_file) gave (as the writer
    /// returns it): sync the temporary file and rename it over the output (for an output
    /// written in place, nothing more to do).
    pub fn commit(mut self, file: File) -> Result<()> {
        self.file = None;
        if self.direct {
            self.committed = true;
            return Ok(());
        }
        file.sync_all().map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("cannot write {}: {e}", self.tmp.display()),
            )
        })?;
        drop(file);
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "cannot rename {} to {}: {e}",
                    self.tmp.display(),
                    self.dest.display()
                ),
            )
        })?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if !self.committed && !self.direct {
            self.file = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
