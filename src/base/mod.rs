//! Foundation helpers that know nothing about memories: durable file writes
//! ([`durable`]), byte helpers ([`bytes`]: hex, constant-time comparison),
//! the rate limit of repeated log lines ([`repeat`]) and a regular
//! expression set that keeps a bounded number of search caches
//! ([`patterns`]).
//!
//! Every module that replaces a whole file (scheduler state, tokens, config,
//! backups, the index's `FORMAT` marker, documents under `memories/` through
//! `store`) does it with [`durable::write_atomic`], so there is one place
//! that gets the temp-file, `fsync`, rename and directory-`fsync` sequence
//! right.

pub mod bytes;
pub mod durable;
pub mod patterns;
pub mod repeat;
