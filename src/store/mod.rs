//! The source of truth: Markdown documents and the fact journal under `memories/`,
//! plus the writer lock that makes one process the only writer of a root.
//!
//! Only this module writes below `memories/`: the journal ([`journal`],
//! [`archive`]), categories ([`categories`]), group membership
//! ([`members`]), the sync ignore file ([`syncfiles`]), the rename ledger
//! that keeps a moved document's id ([`renames`]), and documents added
//! by an import or a migration or taken from a backup ([`files`]), and the
//! copy of the files as they stood at an instant (`cut.rs`, into a temporary root). Every
//! whole-file replacement goes through [`crate::base::durable`].
//! `tests/integration/layering.rs` fails on a file write in another module
//! that names a path under `memories/`. No symbolic link under `memories/`
//! is ever followed, to read or to write ([`links`]).

pub mod archive;
pub mod categories;
pub(crate) mod cut;
pub mod device;
pub mod error;
pub mod files;
pub mod journal;
pub mod links;
pub(crate) mod listing;
pub mod lock;
pub mod markdown;
pub mod members;
pub mod renames;
pub mod syncfiles;

pub use error::StoreError;
