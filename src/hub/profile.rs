//! Use case: the profile the bootstrap interview gathers (`POST
//! /v1/profile`, the MCP tool `memory_profile` that the `bootstrap_interview`
//! prompt asks the agent to call).
//!
//! Each answer becomes one pinned memory (tier `t0`, kind `profile`, tags
//! `bootstrap`, `profile` and its topic, source `bootstrap`, privacy
//! `personal`) in the caller's write scene, and the whole profile one
//! category (`profile`, slot `custom`), which every session start injects.
//! A second run updates rather than duplicates: an answer to a topic that
//! already has one supersedes it (a new version; the old one stays in the
//! history), the same answer again changes nothing, and the category is
//! replaced. Pinning needs `*`, as on any write; every answer meets the rules
//! of a write (credentials refused, privacy scopes, the scene's rights).

use std::collections::BTreeMap;

use super::read::narrow;
use super::{Caller, Hub, WriteAction};
use crate::api::{
    CategoriesBody, CategoryAction, ProfileAction, ProfileBody, ProfileItem, ProfileReply,
    ProfileTopic, WriteBody,
};
use crate::auth::scope;
use crate::error::{Error, Result};
use crate::index::filter::Scope;
use crate::index::meta_read::Latest;
use crate::model::{Memory, Origin, Privacy, Stage, Tier};

/// The kind of a profile memory.
const KIND: &str = "profile";
/// The tags every profile memory carries.
const TAGS: [&str; 2] = ["bootstrap", "profile"];
/// The source recorded on every profile memory.
const SOURCE: &str = "bootstrap";
/// The category that holds the whole profile.
pub(crate) const CATEGORY: &str = "profile";
/// Longest answer, in characters.
const MAX_ANSWER: usize = 4000;

impl Hub {
    /// Stores the interview's answers (see the module docs).
    pub fn profile(&self, caller: &Caller, body: ProfileBody) -> Result<ProfileReply> {
        caller.require(scope::ALL)?;
        let scene = caller.write_scene(body.scene.as_deref())?;
        let answers = checked(body.answers)?;
        let mut current = self.profile_memories(caller, &scene)?;
        let mut items = Vec::new();
        for (topic, text) in answers {
            let old = current.get(&topic);
            if old.is_some_and(|m| m.text.trim() == text) {
                let id = old.map(|m| m.id.clone()).unwrap_or_default();
                items.push(ProfileItem {
                    topic,
                    id,
                    action: ProfileAction::Unchanged,
                    supersedes: None,
                });
                continue;
            }
            let supersedes = old.map(|m| m.id.clone());
            let out = self.write(caller, profile_write(&scene, topic, &text, &supersedes))?;
            let action = match (out.action, &supersedes) {
                (WriteAction::Noop, _) => ProfileAction::Unchanged,
                (_, Some(_)) => ProfileAction::Updated,
                (_, None) => ProfileAction::Created,
            };
            items.push(ProfileItem {
                topic,
                id: out.id,
                action,
                supersedes,
            });
        }
        current = self.profile_memories(caller, &scene)?;
        self.categories(
            caller,
            CategoriesBody {
                action: CategoryAction::Set,
                name: Some(CATEGORY.into()),
                slot: Some("custom".into()),
                content: Some(render(&current)),
                scene: Some(scene.as_str().to_string()),
            },
        )?;
        Ok(ProfileReply {
            scene,
            items,
            category: CATEGORY.into(),
        })
    }

    /// The current profile memory of each topic in `scene` that `caller`
    /// may replace (its writable filter).
    fn profile_memories(
        &self,
        caller: &Caller,
        scene: &crate::model::Scene,
    ) -> Result<BTreeMap<ProfileTopic, Memory>> {
        let want = Scope {
            scenes: vec![scene.clone()],
            kinds: vec![KIND.into()],
            origins: vec![Origin::Fact],
            stages: vec![Stage::Long],
            unexpired_at: Some(caller.now()),
            ..Scope::default()
        };
        let rows = self.core.index.meta.latest(
            &narrow(&caller.writable()?, &want),
            &Latest {
                limit: 200,
                ..Latest::default()
            },
        )?;
        let mut out = BTreeMap::new();
        // Newest first: the first memory of a topic is its current answer.
        for m in rows {
            if !TAGS.iter().all(|t| m.tags.iter().any(|x| x == t)) {
                continue;
            }
            let topic = ProfileTopic::ALL
                .iter()
                .find(|t| m.tags.iter().any(|x| x == t.as_str()));
            if let Some(t) = topic {
                out.entry(*t).or_insert(m);
            }
        }
        Ok(out)
    }
}

/// The answers, trimmed, one per topic, in topic order; a credential in
/// any of them refuses them all.
fn checked(answers: Vec<crate::api::ProfileAnswer>) -> Result<BTreeMap<ProfileTopic, String>> {
    if answers.is_empty() {
        return Err(Error::invalid("answers must not be empty"));
    }
    let mut out = BTreeMap::new();
    for a in answers {
        let text = a.text.trim().to_string();
        if text.is_empty() || text.chars().count() > MAX_ANSWER {
            return Err(Error::invalid(format!(
                "the answer about {} must be 1-{MAX_ANSWER} characters",
                a.topic.as_str()
            )));
        }
        // All answers are checked before any is stored: a refused one leaves
        // the profile as it was.
        if let Some(what) = crate::content::detect_credential(&text) {
            return Err(Error::invalid(format!(
                "the answer about {} appears to contain {what}; a profile never holds \
                 credentials, so nothing was stored. Remove it and try again",
                a.topic.as_str()
            )));
        }
        if out.insert(a.topic, text).is_some() {
            return Err(Error::invalid(format!(
                "two answers about {}; give one per topic",
                a.topic.as_str()
            )));
        }
    }
    Ok(out)
}

/// The write of one answer.
fn profile_write(
    scene: &crate::model::Scene,
    topic: ProfileTopic,
    text: &str,
    supersedes: &Option<String>,
) -> WriteBody {
    WriteBody {
        text: text.to_string(),
        scene: Some(scene.as_str().to_string()),
        kind: Some(KIND.into()),
        title: Some(format!("Profile: {}", topic.as_str())),
        tags: Some(
            TAGS.iter()
                .map(|t| t.to_string())
                .chain([topic.as_str().to_string()])
                .collect(),
        ),
        privacy: Some(Privacy::Personal),
        tier: Some(Tier::T0),
        importance: Some(0.9),
        supersedes: supersedes.clone(),
        source: Some(SOURCE.into()),
        ..WriteBody::default()
    }
}

/// The profile category's content: one section per topic.
fn render(current: &BTreeMap<ProfileTopic, Memory>) -> String {
    let mut out = String::from("The owner's profile, from the bootstrap interview.\n");
    for (topic, m) in current {
        out.push_str(&format!("\n## {}\n\n{}\n", topic.as_str(), m.text.trim()));
    }
    out
}
