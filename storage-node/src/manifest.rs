//! The data directory's fixed files: the manifest (format version and
//! layout) and the writer epoch; the lock is in [`crate::dir_lock`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{Durability, StorageConfig};
use crate::dir_lock::LOCK;
use crate::disk::{Disk, DiskFile, FileKind};
use crate::error::{InvalidManifest, ManifestError, Result, StorageError};

/// Version of the on-disk format this build reads and writes.
pub const FORMAT_VERSION: u32 = 5;
const MANIFEST: &str = "MANIFEST";
const EPOCH: &str = "EPOCH";
const MANIFEST_HEADER: &str = "splitkv data directory";

/// The layout of a data directory, fixed when it is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Manifest {
    /// On-disk format version.
    pub format: u32,
    /// Number of partitions.
    pub partitions: usize,
    /// Capacity of each write buffer's data area.
    pub buffer_bytes: usize,
    /// Size of each key-log chunk.
    pub keylog_chunk_bytes: usize,
    /// Size of each value-log segment.
    pub segment_bytes: u64,
}

impl Manifest {
    fn encode(&self) -> String {
        format!(
            "{MANIFEST_HEADER}\nformat = {}\npartitions = {}\nbuffer_bytes = {}\nkeylog_chunk_bytes = {}\nsegment_bytes = {}\n",
            self.format,
            self.partitions,
            self.buffer_bytes,
            self.keylog_chunk_bytes,
            self.segment_bytes
        )
    }

    fn parse(text: &str) -> std::result::Result<Self, InvalidManifest> {
        let mut lines = text.lines();
        if lines.next() != Some(MANIFEST_HEADER) {
            return Err(InvalidManifest::NotAManifest);
        }
        let mut fields = std::collections::HashMap::new();
        for line in lines.filter(|l| !l.trim().is_empty()) {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| InvalidManifest::MalformedLine(line.to_string()))?;
            let value: u64 = value
                .trim()
                .parse()
                .map_err(|_| InvalidManifest::MalformedNumber(line.to_string()))?;
            fields.insert(key.trim().to_string(), value);
        }
        let get = |name: &'static str| {
            fields
                .get(name)
                .copied()
                .ok_or(InvalidManifest::MissingField(name))
        };
        // The version first: the other fields differ between versions.
        let format =
            u32::try_from(get("format")?).map_err(|_| InvalidManifest::FormatOutOfRange)?;
        if format != FORMAT_VERSION {
            return Err(InvalidManifest::OtherFormat {
                found: format,
                reads: FORMAT_VERSION,
            });
        }
        let manifest = Manifest {
            format,
            partitions: get("partitions")? as usize,
            buffer_bytes: get("buffer_bytes")? as usize,
            keylog_chunk_bytes: get("keylog_chunk_bytes")? as usize,
            segment_bytes: get("segment_bytes")?,
        };
        validate_layout(&manifest)?;
        Ok(manifest)
    }

    /// Reads the manifest of `dir`, or creates the directory and its
    /// manifest from `config` if the directory is new. An existing manifest
    /// wins over the configuration, except that a different partition count
    /// is an error.
    pub fn load_or_create(disk: &dyn Disk, config: &StorageConfig) -> Result<Self> {
        let dir = &config.data_dir;
        let path = dir.join(MANIFEST);
        let manifest_err = |reason: ManifestError| StorageError::Manifest {
            path: path.clone(),
            reason,
        };
        match disk.open(&path, FileKind::Plain, false) {
            Ok(file) => {
                let text =
                    read_small(&*file).map_err(|e| manifest_err(ManifestError::Unreadable(e)))?;
                let manifest = Self::parse(&text).map_err(|e| manifest_err(e.into()))?;
                if manifest.partitions != config.partitions {
                    return Err(manifest_err(ManifestError::PartitionCount {
                        found: manifest.partitions,
                        asked: config.partitions,
                    }));
                }
                Ok(manifest)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                refuse_foreign_directory(disk, dir)?;
                let manifest = Manifest {
                    format: FORMAT_VERSION,
                    partitions: config.partitions,
                    buffer_bytes: config.buffer_bytes,
                    keylog_chunk_bytes: config.keylog_chunk_bytes,
                    segment_bytes: config.segment_bytes,
                };
                validate_layout(&manifest).map_err(|e| manifest_err(e.into()))?;
                let tmp = dir.join("MANIFEST.tmp");
                let file = disk
                    .open(&tmp, FileKind::Plain, true)
                    .map_err(|e| StorageError::io(format!("creating {}", tmp.display()), e))?;
                file.write_at(manifest.encode().as_bytes(), 0)
                    .and_then(|()| file.sync_data())
                    .and_then(|()| disk.rename(&tmp, &path))
                    .and_then(|()| disk.sync_dir(dir))
                    .map_err(|e| StorageError::io(format!("writing {}", path.display()), e))?;
                Ok(manifest)
            }
            Err(e) => Err(StorageError::io(format!("opening {}", path.display()), e)),
        }
    }
}

fn validate_layout(m: &Manifest) -> std::result::Result<(), InvalidManifest> {
    if m.partitions == 0 || m.partitions > 1024 {
        return Err(InvalidManifest::PartitionCount(m.partitions));
    }
    if m.buffer_bytes < 4096 || !m.buffer_bytes.is_multiple_of(4096) {
        return Err(InvalidManifest::BufferBytes(m.buffer_bytes));
    }
    if m.keylog_chunk_bytes < 4096 || !m.keylog_chunk_bytes.is_multiple_of(4096) {
        return Err(InvalidManifest::KeylogChunkBytes(m.keylog_chunk_bytes));
    }
    if !m.segment_bytes.is_multiple_of(4096) || m.segment_bytes < m.buffer_bytes as u64 {
        return Err(InvalidManifest::SegmentBytes {
            segment_bytes: m.segment_bytes,
            buffer_bytes: m.buffer_bytes,
        });
    }
    Ok(())
}

/// A new data directory must be empty (apart from what a file system or an
/// interrupted creation leaves), so that SplitKV never writes into a
/// directory that holds something else.
fn refuse_foreign_directory(disk: &dyn Disk, dir: &Path) -> Result<()> {
    let names = match disk.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StorageError::io(format!("listing {}", dir.display()), e)),
    };
    for name in names {
        let known = ["lost+found", LOCK, "MANIFEST.tmp", "DIRECT_IO_PROBE"];
        if !known.iter().any(|k| name == *k) {
            return Err(StorageError::Manifest {
                path: dir.join(MANIFEST),
                reason: ManifestError::ForeignDirectory(name),
            });
        }
    }
    Ok(())
}

fn read_small(file: &dyn DiskFile) -> std::io::Result<String> {
    let len = file.len_bytes()?;
    if len > 64 * 1024 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "file is too large",
        ));
    }
    let mut buf = vec![0u8; len as usize];
    let n = file.read_at(&mut buf, 0)?;
    buf.truncate(n);
    String::from_utf8(buf)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
}

/// The stored writer epoch: each new writer takes a higher one, and writes
/// from holders of a lower one are refused. A new epoch is stored as
/// durably as an acknowledged write ([`EpochFile::store`]).
pub struct EpochFile {
    path: PathBuf,
    file: Arc<dyn DiskFile>,
}

impl EpochFile {
    /// Opens the epoch file of `dir` and returns it with the stored epoch
    /// (0 for a new directory).
    pub fn open(disk: &dyn Disk, dir: &Path) -> Result<(Self, u64)> {
        let path = dir.join(EPOCH);
        let file = disk
            .open(&path, FileKind::Plain, true)
            .map_err(|e| StorageError::io(format!("opening {}", path.display()), e))?;
        let mut raw = [0u8; 12];
        let n = file
            .read_at(&mut raw, 0)
            .map_err(|e| StorageError::io(format!("reading {}", path.display()), e))?;
        let epoch = if n < raw.len() {
            0
        } else {
            let epoch = u64::from_le_bytes(raw[..8].try_into().expect("8 bytes"));
            let crc = u32::from_le_bytes(raw[8..].try_into().expect("4 bytes"));
            if crc != crc32c::crc32c(&raw[..8]) {
                return Err(StorageError::Manifest {
                    path,
                    reason: ManifestError::EpochChecksum,
                });
            }
            epoch
        };
        Ok((Self { path, file }, epoch))
    }

    /// Stores `epoch` before returning, as durably as `durability` makes an
    /// acknowledged write: in the page cache for [`Durability::Mmap`]
    /// (it survives a crash or `kill -9` of the process, not a power loss,
    /// after which an older writer could be let in again as writes
    /// acknowledged since may be gone), on the device for
    /// [`Durability::Sync`]. The sync waits for every write the device
    /// holds, which after a large load can take hundreds of milliseconds.
    pub fn store(&self, epoch: u64, durability: Durability) -> Result<()> {
        let mut raw = [0u8; 12];
        raw[..8].copy_from_slice(&epoch.to_le_bytes());
        let crc = crc32c::crc32c(&raw[..8]);
        raw[8..].copy_from_slice(&crc.to_le_bytes());
        self.file
            .write_at(&raw, 0)
            .and_then(|()| match durability {
                Durability::Mmap => Ok(()),
                Durability::Sync => self.file.sync_data(),
            })
            .map_err(|e| StorageError::io(format!("writing {}", self.path.display()), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trips() {
        let m = Manifest {
            format: FORMAT_VERSION,
            partitions: 16,
            buffer_bytes: 1 << 20,
            keylog_chunk_bytes: 8 << 20,
            segment_bytes: 32 << 20,
        };
        assert_eq!(Manifest::parse(&m.encode()), Ok(m));
    }

    #[test]
    fn manifest_rejects_other_versions_and_garbage() {
        let m = Manifest {
            format: 99,
            partitions: 16,
            buffer_bytes: 1 << 20,
            keylog_chunk_bytes: 8 << 20,
            segment_bytes: 32 << 20,
        };
        assert!(
            Manifest::parse(&m.encode())
                .unwrap_err()
                .to_string()
                .contains("version 99")
        );
        for older in 1..FORMAT_VERSION {
            let refusal = Manifest::parse(&Manifest { format: older, ..m }.encode())
                .unwrap_err()
                .to_string();
            assert!(
                refusal.contains(&format!("format version {older}"))
                    && refusal.contains(&format!("version {FORMAT_VERSION}")),
                "{refusal}"
            );
        }
        assert!(Manifest::parse("hello").is_err());
        assert!(Manifest::parse("splitkv data directory\nformat = 1\n").is_err());
    }
}
