//! The one integration-test binary. Every test works in its own temp root.

mod support;
mod sync_test;

mod api_fuzz;
mod backup;
mod cli;
mod console;
mod consolidate;
mod crash;
mod diskfull;
mod doctor;
mod documents;
mod eval_quality;
mod hardening;
mod heal;
mod http_api;
mod http_privacy;
mod http_support;
mod hub;
mod journal;
mod lifecycle;
mod mcp;
mod merge;
mod openapi;
mod prop;
mod reindex;
mod relevance;
mod salience;
mod scale;
mod semantic;
mod serve;
mod side_channels;
mod tokenizer;
mod transfer;
mod watch;
mod write_rules;
