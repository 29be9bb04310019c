//! The read-only memory map of a whole file (the one `unsafe` call of the transport).

use std::fmt;
use std::fs::File;
use std::ops::Deref;
use std::path::Path;

use memmap2::Mmap;

use crate::error::{Error, ErrorKind, Result};

// ---------------------------------------------------------------------------------------
// Memory map
// ---------------------------------------------------------------------------------------

/// A read-only memory map of a whole file.
///
/// # Safety contract (not checked)
///
/// The mapping shares the file's pages with every other process. While a `Mapping` (or a
/// [`FileReader`](crate::FileReader) built on it, or any slice borrowed from either) is alive, the file **must
/// not be truncated or modified** by this or any other process: a truncation makes reads of
/// the vanished pages fault (SIGBUS), and a modification changes bytes that were already
/// validated and handed out as immutable slices. Write files under a temporary name and
/// rename them into place; never rewrite a file that readers may have mapped.
pub struct Mapping {
    map: Option<Mmap>,
}

impl Mapping {
    /// Map the file at `path` (see the type's safety contract). Only a regular file can
    /// be mapped: a FIFO, socket or device is `IO` naming what it is, and opening one
    /// never blocks (a FIFO without a writer would otherwise wait forever).
    pub fn open(path: impl AsRef<Path>) -> Result<Mapping> {
        let path = path.as_ref();
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // Without it, opening a FIFO waits for a writer. Reading a regular file
            // ignores the flag.
            options.custom_flags(libc::O_NONBLOCK);
        }
        let file = options.open(path).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("cannot open {}: {e}", path.display()),
            )
        })?;
        let kind = file.metadata()?.file_type();
        if !kind.is_file() {
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "{} is {}, not a regular file: a .tdf file is mapped, so it must be a \
                     regular file (read a stream of frames with the stream reader instead)",
                    path.display(),
                    describe_kind(&kind)
                ),
            ));
        }
        Mapping::from_file(&file).map_err(|e| e.context(format!("mapping {}", path.display())))
    }

    /// Map an open file (see the type's safety contract).
    pub fn from_file(file: &File) -> Result<Mapping> {
        let len = file.metadata()?.len();
        if len == 0 {
            // Nothing to map (and some platforms refuse zero-length mappings).
            return Ok(Mapping { map: None });
        }
        // SAFETY: `Mmap::map` is unsafe because the mapped file may be truncated or modified
        // concurrently, which would invalidate the `&[u8]` this type hands out (SIGBUS on
        // truncation, changing bytes on modification). That cannot be checked; it is the
        // documented contract of `Mapping` and `FileReader::open` that callers do not modify
        // or truncate a file while it is mapped. The mapping is read-only and private to this
        // value, and every read through it is bounds-checked against its length.
        let map = unsafe { Mmap::map(file) }?;
        Ok(Mapping { map: Some(map) })
    }

    /// The mapped bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.map {
            Some(m) => m,
            None => &[],
        }
    }
}

/// What a file that is not a regular file is, for the error that refuses it.
fn describe_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

impl Deref for Mapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapping")
            .field("len", &self.as_bytes().len())
            .finish()
    }
}
