//! The source of truth: Markdown documents and the fact journal under `memories/`,
//! plus the writer lock that makes one process the only writer of a root.
//!
//! Only this module writes below `memories/`.

pub mod archive;
pub mod atomic;
pub mod device;
pub mod journal;
pub mod lock;
pub mod markdown;
pub mod members;
pub mod syncfiles;
