//! The SplitKV compute node: a stateless [`Engine`] in front of a storage
//! node (the key index and two sliding read windows per partition, in
//! memory, rebuilt from the storage node at start), and a Redis-protocol
//! server in front of the engine ([`resp`]).

mod active_expiry;
mod batch_gate;
mod cache;
mod coalesce;
pub mod config;
pub mod datatypes;
mod engine;
pub mod error;
pub mod expiry;
mod follow;
pub mod index;
mod reads;
mod rebuild;
mod replication;
pub mod resp;
mod storage;
mod view;
mod walk;
mod window;
mod writes;

pub use config::EngineConfig;
pub use engine::{Engine, EngineStats};
pub use error::{EngineError, Result};
pub use index::IndexStats;
pub use replication::{Promotion, Replication};
pub use splitkv_common::client::{BatchOp, KeyWrite};
