//! Opening a partition after a clean stop or a crash.
//!
//! 1. Every write buffer whose header says it is unflushed is written to the
//!    value log at the offset its header names, the value log is synced, and
//!    only then is the buffer marked free. Replaying is idempotent: the bytes
//!    below a buffer's fill never change while it is unflushed.
//! 2. The key log is scanned and cut at the first frame that does not
//!    verify (see the `keylog` module).
//! 3. The newest checkpoint that verifies and whose position the key log
//!    still holds is the base: the partition's entries are the
//!    checkpoint's and the key log's after its position. A torn or corrupt
//!    checkpoint is passed over for the one before; with none, the whole
//!    key log is read (an error if its first chunks are gone). What the
//!    checkpoint it could still fall back to is swept below is kept for
//!    the node's tombstone floor (see the `checkpoint` module).
//! 4. New records start past every record the key log or the checkpoint
//!    points at and every range a buffer covered.
//!
//! If the disk is too full to replay a buffer, the whole engine opens
//! read-only (every partition refuses writes): the buffer stays unflushed,
//! its records are served from its mapping, and the next open tries again.

use std::path::Path;
use std::sync::Arc;

use crate::aligned::align_up;
use crate::buffer::{BufferState, WriteBuffer};
use crate::checkpoint::{self, Checkpoint, CheckpointError};
use crate::disk::{Disk, FileKind};
use crate::error::{Result, StorageError};
use crate::keylog::{KeyLog, ScanSummary};
use crate::manifest::Manifest;
use crate::partition::value_log::ValueLog;
use crate::partition::{BufferSlot, PartitionParts};

/// What recovery did for one partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionRecovery {
    /// Unflushed buffers written to the value log.
    pub replayed_buffers: usize,
    /// Bytes written while replaying them.
    pub replayed_bytes: u64,
    /// The key-log scan.
    pub keylog: ScanSummary,
    /// Where new records start in the value log.
    pub next_base: u64,
    /// The key-log position of the checkpoint the partition opened from.
    pub checkpoint_position: Option<u64>,
    /// Checkpoints passed over, and why.
    pub checkpoints_passed_over: u32,
}

/// A recovered partition: its parts, ready to open, and what recovery did.
pub(crate) struct Recovered {
    pub(crate) parts: PartitionParts,
    pub(crate) report: PartitionRecovery,
    /// Set when a buffer could not be replayed for want of space.
    pub(crate) read_only_reason: Option<String>,
}

/// Directory of partition `id` inside the data directory.
pub(crate) fn partition_dir(data_dir: &Path, id: usize) -> std::path::PathBuf {
    data_dir.join(format!("p{id:03}"))
}

pub(crate) fn recover_partition(
    disk: &Arc<dyn Disk>,
    data_dir: &Path,
    id: usize,
    manifest: &Manifest,
) -> Result<Recovered> {
    let dir = partition_dir(data_dir, id);
    let ctx = |what: &str, e| StorageError::io(format!("{what} in {}", dir.display()), e);
    let created = !disk
        .exists(&dir)
        .map_err(|e| ctx("looking up the partition directory", e))?;
    if created {
        disk.create_dir_all(&dir)
            .map_err(|e| ctx("creating the partition directory", e))?;
    }
    let vlog = ValueLog::open(Arc::clone(disk), &dir, manifest.segment_bytes)
        .map_err(|e| ctx("opening the value log's segments", e))?;
    let (keylog, scan) = KeyLog::open(disk, &dir, manifest.keylog_chunk_bytes)
        .map_err(|e| ctx("opening the key log", e))?;
    let disk_arc = disk;
    let disk = &**disk;
    let mut buffers = Vec::with_capacity(2);
    for index in 0..2 {
        let path = dir.join(format!("buffer.{index}"));
        let buffer = WriteBuffer::open(disk, &path, manifest.buffer_bytes)
            .map_err(|e| ctx(&format!("opening write buffer {index}"), e))?;
        buffers.push(Arc::new(buffer));
    }
    if created {
        disk.sync_dir(&dir)
            .and_then(|()| disk.sync_dir(data_dir))
            .map_err(|e| ctx("syncing the new partition directory", e))?;
    }

    let mut report = PartitionRecovery {
        keylog: scan,
        ..PartitionRecovery::default()
    };
    let chosen = choose_checkpoint(disk, &dir, &keylog, &mut report)?;
    let checkpoint_is_current_file = chosen.name == Some(checkpoint::CURRENT);
    let checkpoint = chosen.checkpoint;
    let keylog_entries_before_checkpoint = checkpoint.as_ref().map_or(0, |c| {
        let mut after = 0u64;
        keylog
            .snapshot()
            .for_each_entry(c.position..u64::MAX, |_| after += 1);
        keylog.entries().saturating_sub(after)
    });
    let mut slots = [BufferSlot::Flushed, BufferSlot::Flushed];
    let mut read_only_reason = None;
    let mut replayed = Vec::new();
    for (index, buffer) in buffers.iter().enumerate() {
        let header = buffer.header();
        if !header.state.is_unflushed() {
            continue;
        }
        if header.fill == 0 || header.fill as usize > buffer.capacity() {
            buffer.set_state(BufferState::Free);
            continue;
        }
        // SAFETY: nothing else uses the buffer during recovery.
        let data = unsafe { buffer.padded_records(header.fill) };
        match vlog.write_at(data, header.base) {
            Ok(()) => {
                report.replayed_buffers += 1;
                report.replayed_bytes += data.len() as u64;
                replayed.push(index);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                read_only_reason = Some(format!(
                    "the disk is too full to recover partition {id} ({} unflushed bytes at value-log offset {}); \
                     free space and restart to make it writable",
                    header.fill, header.base
                ));
                slots[index] = BufferSlot::recovered_unflushed(header.base, header.fill);
            }
            Err(e) => return Err(ctx("replaying an unflushed write buffer", e)),
        }
    }
    if !replayed.is_empty() {
        vlog.sync_data()
            .map_err(|e| ctx("syncing the value log after replay", e))?;
        for index in replayed {
            buffers[index].set_state(BufferState::Free);
            buffers[index]
                .sync_header()
                .map_err(|e| ctx("marking a replayed buffer free", e))?;
        }
    }
    // New records go past every record the key log points at and past
    // every range a buffer ever covered. (The file length says nothing: the
    // value log is preallocated ahead of its data.)
    let checkpointed_end = checkpoint.as_ref().map_or(0, |c| c.max_value_end);
    let mut next_base = align_up(scan.max_value_end.max(checkpointed_end));
    for buffer in &buffers {
        let header = buffer.header();
        next_base = next_base.max(align_up(
            header.base + header.fill.min(buffer.capacity() as u64),
        ));
    }
    report.next_base = next_base;
    let [b0, b1]: [Arc<WriteBuffer>; 2] = buffers
        .try_into()
        .unwrap_or_else(|_| unreachable!("two buffers"));
    Ok(Recovered {
        parts: PartitionParts {
            vlog,
            buffers: [b0, b1],
            slots,
            keylog,
            next_base,
            checkpoint,
            checkpoint_is_current_file,
            fallback_swept_below_seq: chosen.fallback_swept_below_seq,
            keylog_entries_before_checkpoint,
            dir: dir.clone(),
            disk: Arc::clone(disk_arc),
        },
        report,
        read_only_reason,
    })
}

/// The checkpoint a partition opens from.
struct Chosen {
    /// The checkpoint, `None` to read the whole key log.
    checkpoint: Option<Arc<Checkpoint>>,
    /// Its file's name.
    name: Option<&'static str>,
    /// What `checkpoint.prev` is swept below, when the partition opens from
    /// `checkpoint` and `checkpoint.prev` would open too.
    fallback_swept_below_seq: Option<u64>,
}

/// The checkpoint to open the partition from (see the module
/// documentation).
fn choose_checkpoint(
    disk: &dyn Disk,
    dir: &Path,
    keylog: &KeyLog,
    report: &mut PartitionRecovery,
) -> Result<Chosen> {
    let (current, previous) = checkpoint::load(disk, dir);
    let usable = |found: checkpoint::Loaded| match found {
        Ok(c) if c.position >= keylog.first_position() && c.position <= keylog.end() => Ok(c),
        Ok(c) => Err(CheckpointError::OutsideKeyLog {
            position: c.position,
            first: keylog.first_position(),
            end: keylog.end(),
        }),
        Err(reason) => Err(reason),
    };
    let mut problems = Vec::new();
    let fallback_swept_below_seq = usable(previous.clone()).ok().map(|c| c.swept_below_seq);
    for (name, found) in [
        (checkpoint::CURRENT, current),
        (checkpoint::PREVIOUS, previous),
    ] {
        match usable(found) {
            Ok(c) => {
                if !problems.is_empty() {
                    tracing::warn!(
                        "{}: opening from {name} ({})",
                        dir.display(),
                        problems.join("; ")
                    );
                }
                report.checkpoint_position = Some(c.position);
                return Ok(Chosen {
                    checkpoint: Some(c),
                    name: Some(name),
                    fallback_swept_below_seq: fallback_swept_below_seq
                        .filter(|_| name == checkpoint::CURRENT),
                });
            }
            Err(CheckpointError::Missing) => {}
            Err(reason) => {
                report.checkpoints_passed_over += 1;
                problems.push(format!("{name} passed over: {reason}"));
            }
        }
    }
    if keylog.first_position() > 0 {
        return Err(StorageError::io(
            format!("opening {}", dir.display()),
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "no checkpoint can be opened ({}) and the key log before position {} was deleted",
                    if problems.is_empty() {
                        "none found".to_string()
                    } else {
                        problems.join("; ")
                    },
                    keylog.first_position()
                ),
            ),
        ));
    }
    if !problems.is_empty() {
        tracing::warn!(
            "{}: reading the whole key log ({})",
            dir.display(),
            problems.join("; ")
        );
    }
    Ok(Chosen {
        checkpoint: None,
        name: None,
        fallback_swept_below_seq: None,
    })
}

fn open_vlog_error(data_dir: &Path, e: std::io::Error) -> StorageError {
    if e.raw_os_error() == Some(libc::EINVAL) {
        StorageError::DirectIoUnsupported {
            dir: data_dir.to_path_buf(),
            source: e,
        }
    } else {
        StorageError::io(
            format!("opening the value log in {}", data_dir.display()),
            e,
        )
    }
}

/// Checks that the data directory's file system accepts O_DIRECT writes by
/// writing one aligned block to a scratch file.
pub(crate) fn probe_direct_io(disk: &dyn Disk, data_dir: &Path) -> Result<()> {
    let path = data_dir.join("DIRECT_IO_PROBE");
    let unsupported = |source| StorageError::DirectIoUnsupported {
        dir: data_dir.to_path_buf(),
        source,
    };
    let file = disk
        .open(&path, FileKind::Direct, true)
        .map_err(|e| open_vlog_error(data_dir, e))?;
    let block = crate::aligned::AlignedBuf::zeroed(crate::aligned::DIRECT_ALIGN);
    let written = file.write_at(&block, 0);
    drop(file);
    let _ = disk.remove_file(&path);
    match written {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(unsupported(e)),
        Err(e) => Err(StorageError::io(
            format!("probing O_DIRECT in {}", data_dir.display()),
            e,
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::aligned::DIRECT_ALIGN;
    use crate::buffer::{BufferHeader, BufferState, WriteBuffer};
    use crate::{IoEngineKind, OsDisk, StorageConfig, StorageEngine};

    /// A crash leaves a buffer `Filling` whose bytes past the fill are stale
    /// (left by an earlier cycle of the buffer): recovery writes the last
    /// block padded with zeros, never those bytes.
    #[test]
    fn replay_pads_a_filling_buffer_with_zeros() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = StorageConfig::new(dir.path());
        config.partitions = 1;
        config.buffer_bytes = 4 * DIRECT_ALIGN;
        config.io_engine = IoEngineKind::Psync;
        StorageEngine::open(config.clone())
            .expect("create")
            .close()
            .expect("close");

        let fill = 100;
        let buffer_path = super::partition_dir(dir.path(), 0).join("buffer.0");
        {
            let disk = OsDisk::new(IoEngineKind::Psync);
            let buffer =
                WriteBuffer::open(&disk, &buffer_path, config.buffer_bytes).expect("open buffer");
            // SAFETY: no engine has the buffer open.
            unsafe { buffer.data_mut(0, config.buffer_bytes) }.fill(0xAA);
            buffer.write_header(BufferHeader {
                state: BufferState::Filling,
                base: 0,
                fill,
            });
            buffer.sync_data(0, config.buffer_bytes).expect("msync");
        }

        let engine = StorageEngine::open(config).expect("recover");
        assert_eq!(engine.recovery_report()[0].replayed_buffers, 1);
        engine.close().expect("close");
        drop(engine);

        let segment = crate::partition::value_log::segment_file_name(0);
        let vlog = std::fs::read(super::partition_dir(dir.path(), 0).join(segment))
            .expect("read the value log's first segment");
        let block = &vlog[..DIRECT_ALIGN];
        assert!(block[..fill as usize].iter().all(|&b| b == 0xAA));
        assert!(
            block[fill as usize..].iter().all(|&b| b == 0),
            "stale buffer bytes reached the value log below the committed end"
        );
    }
}
