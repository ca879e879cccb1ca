//! `memd conflict`: settle a conflict link between two memories as the
//! local operator, through the same use cases as `POST /v1/conflicts/dismiss`
//! and `POST /v1/conflicts/accept`: `dismiss` ends the link (an `unlink`
//! journal line), `undo` links the pair again, `accept` makes the newer the
//! new version of the older (a supersede).

use super::daemon::Target;
use crate::api::{AcceptConflictBody, DismissConflictBody};

/// What to do with the pair.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Action {
    /// End the link; neither memory changes.
    Dismiss,
    /// Link the pair again (undo a dismiss).
    Undo,
    /// The newer memory supersedes the older (give the older first).
    Accept,
}

/// Arguments of `memd conflict`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// dismiss, undo or accept.
    action: Action,
    /// One memory of the pair (for accept: the older).
    id: String,
    /// The other memory of the pair (for accept: the newer).
    other: String,
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    if let Action::Accept = args.action {
        let body = AcceptConflictBody {
            older: args.id.clone(),
            newer: args.other.clone(),
        };
        let done = target.call("/v1/conflicts/accept", body, |hub, c, body| {
            hub.accept_conflict(c, body)
        })?;
        if cli.json {
            return super::print_json(&done);
        }
        outln!("{} now supersedes {}", done.by, done.superseded);
        return Ok(());
    }
    let body = DismissConflictBody {
        id: args.id.clone(),
        other: args.other.clone(),
        undo: matches!(args.action, Action::Undo),
    };
    let done = target.call("/v1/conflicts/dismiss", body, |hub, c, body| {
        hub.dismiss_conflict(c, body)
    })?;
    if cli.json {
        super::print_json(&done)
    } else if done.linked {
        outln!("linked {} and {} again", done.id, done.other);
        Ok(())
    } else {
        outln!(
            "dismissed the conflict between {} and {}",
            done.id,
            done.other
        );
        Ok(())
    }
}
