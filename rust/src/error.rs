//! Errors of the core. They carry the byte position (and the batch offset when known) so the
//! Python layer can name file, offset, position and reason.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bytes that do not form a valid batch or record (bad sizes, bad varints, CRC mismatch...).
    Corrupt,
    /// The file or buffer ends inside a batch: a torn write.
    Truncated,
    /// A format we recognise but do not handle (e.g. magic 0/1 message sets).
    Unsupported,
    /// The compressed payload could not be (de)compressed.
    Compression,
    /// An index file that is not consistent with its log.
    Index,
    /// A caller error (bad argument, offsets out of order on append...).
    InvalidArgument,
    Io,
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    /// Byte position in the file or buffer where the problem was found (start of the batch).
    pub position: Option<u64>,
    /// Base offset of the batch concerned, when it could be read.
    pub offset: Option<i64>,
    pub reason: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: ErrorKind, reason: impl Into<String>) -> Self {
        Error { kind, position: None, offset: None, reason: reason.into() }
    }
    pub fn corrupt(position: u64, offset: Option<i64>, reason: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Corrupt, position: Some(position), offset, reason: reason.into() }
    }
    pub fn truncated(position: u64, offset: Option<i64>, reason: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Truncated, position: Some(position), offset, reason: reason.into() }
    }
    pub fn invalid(reason: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, reason)
    }
    pub fn at(mut self, position: u64, offset: Option<i64>) -> Self {
        if self.position.is_none() {
            self.position = Some(position);
        }
        if self.offset.is_none() {
            self.offset = offset;
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)?;
        if let Some(o) = self.offset {
            write!(f, " (batch base offset {o}")?;
            if let Some(p) = self.position {
                write!(f, ", byte position {p}")?;
            }
            f.write_str(")")?;
        } else if let Some(p) = self.position {
            write!(f, " (byte position {p})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::new(ErrorKind::Io, e.to_string())
    }
}
