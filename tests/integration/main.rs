//! The one integration-test binary. Every test works in its own temp root.

mod support;

mod backup;
mod cli;
mod crash;
mod doctor;
mod documents;
mod hub;
mod reindex;
mod transfer;
