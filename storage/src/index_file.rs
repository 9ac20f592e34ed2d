//! The file underneath `.index` and `.timeindex`: fixed-size big-endian
//! entries appended one after another, mirrored in memory as a `Vec`.
//!
//! Kafka preallocates and mmaps these files; we append instead, so the file
//! length is always exactly `entries * SIZE` and a torn write shows up as a
//! size that is not a multiple of the entry size.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::open_files::{CachedFile, Reopen};

/// One fixed-size index entry.
pub(crate) trait IndexEntry: Copy {
    /// Bytes per entry on disk.
    const SIZE: usize;
    /// Writes the entry into `out` (exactly `SIZE` bytes).
    fn encode(&self, out: &mut [u8]);
    /// Reads an entry from `buf` (exactly `SIZE` bytes).
    fn decode(buf: &[u8]) -> Self;
}

/// Declares an index entry stored as its fields in the order written, each
/// big-endian, nothing between them: the struct as given, plus its
/// [`IndexEntry`] impl, whose `SIZE` is the sum of the fields' sizes.
/// Every field is a primitive integer.
macro_rules! big_endian_entry {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field_vis:vis $field:ident: $ty:ty
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[$field_meta])*
                $field_vis $field: $ty,
            )+
        }

        impl $crate::index_file::IndexEntry for $name {
            const SIZE: usize = 0 $(+ std::mem::size_of::<$ty>())+;

            fn encode(&self, out: &mut [u8]) {
                let mut at = 0;
                $(
                    let bytes = self.$field.to_be_bytes();
                    out[at..at + bytes.len()].copy_from_slice(&bytes);
                    at += bytes.len();
                )+
                debug_assert_eq!(at, Self::SIZE);
            }

            fn decode(buf: &[u8]) -> Self {
                let mut at = 0;
                $(
                    let len = std::mem::size_of::<$ty>();
                    let $field = <$ty>::from_be_bytes(
                        buf[at..at + len].try_into().expect("a whole field"),
                    );
                    at += len;
                )+
                debug_assert_eq!(at, Self::SIZE);
                $name { $($field),+ }
            }
        }
    };
}
pub(crate) use big_endian_entry;

/// What [`IndexFile::load`] found on disk.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LoadStatus {
    /// The file existed and parsed.
    Loaded,
    /// No file: it must be rebuilt from the log if the segment has data.
    Missing,
    /// Unusable (torn size, ...): it must be rebuilt from the log.
    Malformed(String),
}

/// An index file plus its entries in memory.
#[derive(Debug)]
pub(crate) struct IndexFile<E: IndexEntry> {
    entries: Vec<E>,
    /// The file (and its path), opened on the first append through the
    /// process-wide cache of open files, so inactive segments hold no
    /// descriptor.
    writer: CachedFile,
    /// Written through `writer` since the last flush.
    written: bool,
}

impl<E: IndexEntry> IndexFile<E> {
    /// An empty index that will be written at `path` (nothing touches disk yet).
    pub(crate) fn empty(path: PathBuf) -> Self {
        IndexFile {
            writer: CachedFile::closed(path, Reopen::Append),
            entries: Vec::new(),
            written: false,
        }
    }

    /// Reads `path`. A missing or malformed file yields an empty index and a
    /// status telling the caller to rebuild it.
    pub(crate) fn load(path: PathBuf) -> io::Result<(Self, LoadStatus)> {
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok((Self::empty(path), LoadStatus::Missing))
            }
            Err(e) => return Err(e),
        };
        if bytes.len() % E::SIZE != 0 {
            let reason = format!("size {} is not a multiple of {}", bytes.len(), E::SIZE);
            return Ok((Self::empty(path), LoadStatus::Malformed(reason)));
        }
        let entries = bytes.chunks_exact(E::SIZE).map(E::decode).collect();
        Ok((
            IndexFile {
                writer: CachedFile::closed(path, Reopen::Append),
                entries,
                written: false,
            },
            LoadStatus::Loaded,
        ))
    }

    pub(crate) fn path(&self) -> &Path {
        self.writer.path()
    }

    pub(crate) fn entries(&self) -> &[E] {
        &self.entries
    }

    pub(crate) fn last(&self) -> Option<E> {
        self.entries.last().copied()
    }

    /// Size the file has on disk.
    pub(crate) fn size_bytes(&self) -> u64 {
        (self.entries.len() * E::SIZE) as u64
    }

    fn writer(&mut self) -> io::Result<std::sync::Arc<File>> {
        self.written = true;
        self.writer.get()
    }

    /// Appends one entry to memory and disk.
    pub(crate) fn push(&mut self, entry: E) -> io::Result<()> {
        let mut buf = [0u8; 64];
        entry.encode(&mut buf[..E::SIZE]);
        (&*self.writer()?).write_all(&buf[..E::SIZE])?;
        self.entries.push(entry);
        Ok(())
    }

    /// Keeps the first `len` entries.
    pub(crate) fn truncate(&mut self, len: usize) -> io::Result<()> {
        if len >= self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(len);
        self.writer()?.set_len((len * E::SIZE) as u64)?;
        Ok(())
    }

    /// Replaces the whole file with `entries` (used when rebuilding from the log).
    pub(crate) fn rewrite(&mut self, entries: Vec<E>) -> io::Result<()> {
        let mut buf = vec![0u8; entries.len() * E::SIZE];
        for (chunk, e) in buf.chunks_exact_mut(E::SIZE).zip(&entries) {
            e.encode(chunk);
        }
        self.writer.close();
        fs::write(self.writer.path(), &buf)?;
        self.entries = entries;
        Ok(())
    }

    /// fsyncs the file if it was written through this handle.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if self.written {
            self.writer.get()?.sync_all()?;
            self.written = false;
        }
        Ok(())
    }

    /// Drops the append handle (segment became inactive).
    pub(crate) fn close_writer(&mut self) {
        self.writer.close();
    }

    /// Renames the file, e.g. `.index.swap` to `.index` after compaction.
    pub(crate) fn rename_to(&mut self, path: PathBuf) -> io::Result<()> {
        fs::rename(self.writer.path(), &path)?;
        self.writer.set_path(path);
        Ok(())
    }

    /// Removes the file; a missing file is fine.
    pub(crate) fn delete(&mut self) -> io::Result<()> {
        self.writer.close();
        match fs::remove_file(self.writer.path()) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}
