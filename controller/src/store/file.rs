//! [`BlobStore`] in a directory: `head.json` replaced atomically (write,
//! fsync, rename, fsync the directory), blobs as `<name>.jsonl` files
//! written once and fsynced before any head names them.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{BlobStore, StoreLimits};

const HEAD: &str = "head.json";
const BLOB_SUFFIX: &str = ".jsonl";

/// The metadata log in `dir`, and where an older Skein kept its whole image
/// (read once if no head exists yet, removed once one does).
pub struct FileBlobStore {
    dir: PathBuf,
    legacy: Option<PathBuf>,
}

impl FileBlobStore {
    /// A store in `dir` (created when missing).
    pub fn open(dir: &Path, legacy: Option<PathBuf>) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(FileBlobStore {
            dir: dir.to_path_buf(),
            legacy,
        })
    }

    /// A store in `dir`, which must exist (for reading).
    pub fn open_existing(dir: &Path) -> io::Result<Self> {
        if !dir.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(FileBlobStore {
            dir: dir.to_path_buf(),
            legacy: None,
        })
    }

    fn blob_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}{BLOB_SUFFIX}"))
    }
}

impl BlobStore for FileBlobStore {
    fn read_head(&self) -> io::Result<Option<(Vec<u8>, String)>> {
        match std::fs::read(self.dir.join(HEAD)) {
            // One process writes a directory's log (the data directory is
            // its own), so the version only has to be present.
            Ok(bytes) => Ok(Some((bytes, "file".into()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn write_head(&self, bytes: &[u8], _expected: Option<&str>) -> io::Result<String> {
        write_atomic(&self.dir.join(HEAD), bytes)?;
        Ok("file".into())
    }

    fn read_blob(&self, name: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.blob_path(name))
    }

    fn write_blob(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.blob_path(name))?;
        f.write_all(bytes)?;
        // The directory entry is made durable by the fsync of the directory
        // after the head that names the blob is renamed into place.
        f.sync_all()
    }

    fn delete_blob(&self, name: &str) -> io::Result<()> {
        match std::fs::remove_file(self.blob_path(name)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn list_blobs(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let name = entry?.file_name().to_string_lossy().to_string();
            if let Some(stem) = name.strip_suffix(BLOB_SUFFIX) {
                names.push(stem.to_string());
            }
        }
        Ok(names)
    }

    fn read_legacy_image(&self) -> io::Result<Option<Vec<u8>>> {
        match &self.legacy {
            Some(path) => match std::fs::read(path) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
            None => Ok(None),
        }
    }

    fn remove_legacy_image(&self) -> io::Result<()> {
        if let Some(path) = &self.legacy {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    fn limits(&self) -> StoreLimits {
        StoreLimits {
            max_blob_bytes: 8 << 20,
            max_tail_bytes: 64 << 10,
            min_snapshot_interval_bytes: 8 << 20,
            max_log_blobs: 1024,
        }
    }

    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
}

/// Writes `bytes` to `path` so that a crash leaves the old or the new file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
