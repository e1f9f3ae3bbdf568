//! Mutual TLS for the links between nodes, and the certificates they use.
