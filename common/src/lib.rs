//! Pieces shared by every SplitKV node: the on-disk record formats that both
//! halves parse, the wire protocol, configuration limits, and TLS helpers.

pub mod certs;
pub mod limits;
pub mod record;
pub mod tls;
