//! Translation of engine results into protocol messages.

use splitkv_common::message::{PartitionReport, StatsReport, WireError};

use crate::{EngineStats, StorageError};

/// The protocol error a client receives for an engine error.
pub(crate) fn wire_error(err: StorageError) -> WireError {
    match err {
        StorageError::Fenced { yours, current } => WireError::Fenced { yours, current },
        StorageError::TooLarge { what, len, max } => WireError::TooLarge {
            what: what.to_string(),
            len: len as u64,
            max: max as u64,
        },
        StorageError::EmptyKey => WireError::EmptyKey,
        StorageError::NoSuchPartition { partition, count } => WireError::NoSuchPartition {
            partition: partition as u32,
            count: count as u32,
        },
        StorageError::Corrupt {
            partition,
            offset,
            source,
        } => WireError::Corrupt {
            partition: partition as u32,
            offset,
            reason: source.to_string(),
        },
        StorageError::Poisoned { reason } => WireError::Poisoned { reason },
        StorageError::ReadOnly { reason } => WireError::ReadOnly { reason },
        StorageError::DiskFull { context } => WireError::DiskFull { context },
        StorageError::ShuttingDown => WireError::ShuttingDown,
        other => WireError::Io {
            message: other.to_string(),
        },
    }
}

/// The stats report for a client.
pub(crate) fn stats_report(stats: EngineStats, connections: u32) -> StatsReport {
    StatsReport {
        partitions: stats
            .partitions
            .into_iter()
            .map(|p| PartitionReport {
                puts: p.puts,
                deletes: p.deletes,
                value_bytes: p.value_bytes,
                flushes: p.flushes,
                committed_end: p.committed_end,
                keylog_end: p.keylog_end,
            })
            .collect(),
        io_engine: stats.io_engine.to_string(),
        durability: stats.durability.to_string(),
        refusing_writes: stats.refusing_writes,
        writer_epoch: stats.writer_epoch,
        connections,
    }
}
