//! Translation of engine reports into protocol messages.

use splitkv_common::message::StatsReport;

use crate::StorageStats;

/// The stats report for a client.
pub(crate) fn stats_report(
    stats: StorageStats,
    connections: u32,
    stalled_streams_closed: u64,
) -> StatsReport {
    StatsReport {
        partitions: stats.partitions,
        io_engine: stats.io_engine.to_string(),
        durability: stats.durability.to_string(),
        refusing_writes: stats.refusing_writes,
        writer_epoch: stats.writer_epoch,
        connections,
        stalled_streams_closed,
        gc_put_waits: stats.gc_put_waits,
        gc_put_waited_ms: stats.gc_put_waited_ms,
    }
}
