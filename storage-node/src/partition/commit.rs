//! Group commit for sync durability: writers of a partition that wait for
//! durability at the same time share one round of msyncs.
//!
//! A writer asks for its turn: either its key-log frame is already durable,
//! or another writer is syncing (it waits for that round), or it becomes
//! the leader and is told to sync everything from the durable end on. The
//! group commit does no I/O itself; the leader reports the end it reached
//! with [`GroupCommit::finish_round`].

use parking_lot::{Condvar, Mutex};

use crate::error::Result;
use crate::node_state::NodeState;

/// What a writer waiting for durability is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Its frame is durable: nothing to do.
    Durable,
    /// It leads a round: sync the key log from `from` to its end (and the
    /// buffers' unsynced records), then call
    /// [`GroupCommit::finish_round`].
    Lead { from: u64 },
}

/// The durable end of one partition's key log, and whether a round of
/// syncs is under way.
pub(crate) struct GroupCommit {
    rounds: Mutex<Rounds>,
    round_done: Condvar,
}

struct Rounds {
    /// Key-log position below which everything is durable.
    synced_end: u64,
    leader_active: bool,
}

impl GroupCommit {
    /// Everything below `synced_end` is durable already.
    pub(crate) fn new(synced_end: u64) -> Self {
        Self {
            rounds: Mutex::new(Rounds {
                synced_end,
                leader_active: false,
            }),
            round_done: Condvar::new(),
        }
    }

    /// Waits until the key log is durable up to `target` or the caller is
    /// to lead a round. Refuses (with the node's reason) once the node no
    /// longer accepts writes, for example after a failed round.
    pub(crate) fn turn(&self, target: u64, node: &NodeState) -> Result<Turn> {
        let mut rounds = self.rounds.lock();
        loop {
            if rounds.synced_end >= target {
                return Ok(Turn::Durable);
            }
            node.check_writable()?;
            if !rounds.leader_active {
                rounds.leader_active = true;
                return Ok(Turn::Lead {
                    from: rounds.synced_end,
                });
            }
            self.round_done.wait(&mut rounds);
        }
    }

    /// Ends the round the caller led: `reached` is the key-log end it made
    /// durable, `None` if the round failed. Wakes every waiter.
    pub(crate) fn finish_round(&self, reached: Option<u64>) {
        let mut rounds = self.rounds.lock();
        debug_assert!(
            rounds.leader_active,
            "a round ends only once, by its leader"
        );
        rounds.leader_active = false;
        if let Some(end) = reached {
            rounds.synced_end = rounds.synced_end.max(end);
        }
        self.round_done.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::{Durability, Limits};
    use crate::error::StorageError;
    use crate::node_state::NodeSettings;

    fn node() -> NodeState {
        NodeState::new(NodeSettings {
            next_seq: 1,
            writer_epoch: 0,
            read_only: None,
            durability: Durability::Sync,
            limits: Limits::default(),
            keylog_chunk_bytes: 1 << 20,
            range_buffers_kept: 0,
            record_buffers_kept: 0,
            record_buffer_bytes: 0,
            recent: crate::recent::RecentFlushes::new(1, 0),
            directory: crate::directory::KeyDirectory::new(1, 1 << 20),
            space: crate::space::SpaceReserve::new(
                Arc::new(crate::disk::OsDisk::new(crate::uring::IoEngineKind::Psync)),
                std::env::temp_dir(),
                0,
            ),
            dead_bound: crate::space::DeadBytesBound::new(0, 1, 1 << 20),
        })
    }

    #[test]
    fn one_writer_leads_and_its_round_covers_the_others() {
        let node = node();
        let commit = GroupCommit::new(0);
        assert_eq!(commit.turn(0, &node).expect("turn"), Turn::Durable);
        assert_eq!(
            commit.turn(100, &node).expect("turn"),
            Turn::Lead { from: 0 }
        );
        commit.finish_round(Some(300));
        assert_eq!(commit.turn(200, &node).expect("turn"), Turn::Durable);
        assert_eq!(
            commit.turn(400, &node).expect("turn"),
            Turn::Lead { from: 300 }
        );
    }

    #[test]
    fn a_waiter_is_released_by_the_leaders_round() {
        let node = Arc::new(node());
        let commit = Arc::new(GroupCommit::new(0));
        assert_eq!(
            commit.turn(10, &node).expect("turn"),
            Turn::Lead { from: 0 }
        );
        let (asked_tx, asked_rx) = std::sync::mpsc::channel();
        let waiter = {
            let (node, commit) = (Arc::clone(&node), Arc::clone(&commit));
            std::thread::spawn(move || {
                asked_tx.send(()).expect("send");
                commit.turn(20, &node)
            })
        };
        asked_rx.recv().expect("the waiter asks");
        commit.finish_round(Some(20));
        assert_eq!(waiter.join().expect("waiter").expect("turn"), Turn::Durable);
    }

    #[test]
    fn a_failed_round_refuses_its_waiters() {
        let node = node();
        let commit = GroupCommit::new(0);
        assert_eq!(
            commit.turn(10, &node).expect("turn"),
            Turn::Lead { from: 0 }
        );
        node.poison(&StorageError::shutting_down());
        commit.finish_round(None);
        assert!(commit.turn(10, &node).is_err(), "poisoned: refused");
    }
}
