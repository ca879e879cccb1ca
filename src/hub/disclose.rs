//! Use case: disclosure (`POST /v1/disclose`): one group's recent chat and
//! notes, for a known member of that group asking in private.
//!
//! Only a token with `disclose:group` may ask; the group must be a
//! `qq:group:<id>` scene; the asker must be a known member of it (from
//! ingest and membership events), else `FORBIDDEN` and nothing is disclosed
//! (any doubt, such as an unreadable membership table, is "no"). What comes
//! back is normal and personal chat and notes of that one group within the
//! window, oldest first.

use chrono::Duration;

use super::blocks::render_disclosure;
use super::{Caller, Hub};
use crate::api::{DiscloseBody, DiscloseReply, Format};
use crate::error::{Error, Result};
use crate::model::Scene;

impl Hub {
    /// Discloses a group's recent chat to `caller` for `body.asker` (see the module docs).
    pub fn disclose(&self, caller: &Caller, body: DiscloseBody) -> Result<DiscloseReply> {
        caller.scene(body.scene.as_deref())?;
        let group = Scene::parse(&body.group)?;
        let filter = caller.disclose_filter(&group)?;
        let minutes = body.minutes.unwrap_or(180);
        let limit = body.limit.unwrap_or(20);
        if !(1..=1440).contains(&minutes) || !(1..=50).contains(&limit) {
            return Err(Error::invalid("minutes must be 1-1440 and limit 1-50"));
        }
        if !super::ingest::is_member(self, &group, &body.asker) {
            return Err(Error::Forbidden(format!(
                "{} is not a known member of {group}; nothing is disclosed",
                body.asker
            )));
        }
        let since = caller.now() - Duration::minutes(i64::from(minutes));
        let mut items = super::read::since(self, &filter, since, limit)?;
        items.reverse();
        let block =
            Format::is_block(body.format).then(|| render_disclosure(&group, minutes, &items));
        Ok(DiscloseReply {
            group,
            items,
            block,
        })
    }
}
