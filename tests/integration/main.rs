//! The one integration-test binary. Every test works in its own temp root.

mod support;

mod cli;
mod crash;
mod documents;
mod hub;
mod reindex;
mod semantic;
