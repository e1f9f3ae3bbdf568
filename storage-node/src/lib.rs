//! storage-node
