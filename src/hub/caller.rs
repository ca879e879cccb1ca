//! The caller of every use case: who asks, with which rights, and when.
//!
//! A surface builds one [`Caller`] per request and passes it, with the
//! request, to a use case (`hub.write(&caller, body)`): HTTP from the bearer
//! token (`Hub::caller`), the CLI as the local operator
//! ([`crate::hub::Hub::operator`]: every scope, every scene, token name
//! `cli`); MCP goes through `/v1`. Its `now` is read once from the hub's one
//! clock, so every rule of one request sees the same instant.
//!
//! What a grant may see and do is decided here, once (DESIGN §4):
//!
//! - The request's scene must be one of the token's scenes, else `FORBIDDEN`;
//!   a caller can never widen its own rights. A write lands in one of the
//!   token's write scenes.
//! - A token reads its own scenes plus `shared` (or, with `*`, every scene),
//!   `normal` and `personal` always, `sensitive` only with `sensitive:read`,
//!   `secret` only with `secret:read`. `shared` is the audience the owner
//!   writes to on purpose for everyone; sensitive and secret memories cannot
//!   live there unless the operator pins them there.
//! - `from_owner` (needs the `from_owner` scope or `*`) adds one more
//!   alternative: the owner's own memories in the owner's scenes, never
//!   sensitive or secret, never another person's private chat.
//! - Reads carry the request time so expired short-term memories never match.
//!
//! Nothing here looks at results: a filter is handed to the index, which
//! makes it part of the tantivy query and of the SQL `WHERE`.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use crate::auth::{Grant, scope};
use crate::error::{Error, Result};
use crate::index::filter::{Filter, Scope};
use crate::model::{Privacy, Scene, Subject};

/// Scenes that belong to the owner: what `from_owner` opens up.
pub(crate) const OWNER_SCENES: &[&str] = &["main", "qq:owner"];

/// The audience every token may read.
pub(crate) const SHARED_SCENE: &str = "shared";

/// Who calls a use case (see the module docs).
#[derive(Debug, Clone)]
pub struct Caller {
    grant: Grant,
    now: DateTime<Utc>,
    /// The scene the last use case resolved for this caller, for the audit
    /// line; shared by clones, so a surface reads it after the call.
    acted_in: Arc<Mutex<Option<Scene>>>,
    /// The local operator (the CLI, in process or through the daemon's local
    /// credential): a person browsing, whose reads never count as retrievals.
    operator: bool,
}

/// The visibility fields every read request carries.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Visibility<'a> {
    /// The scene the caller acts in (default: the token's first).
    pub(crate) scene: Option<&'a str>,
    /// Scenes to read (default: every scene the token may read).
    pub(crate) scenes: Option<&'a [String]>,
    /// The owner is the one asking (needs the `from_owner` scope).
    pub(crate) from_owner: bool,
}

impl Caller {
    /// A caller with `grant`'s rights at `now`.
    pub(crate) fn new(grant: Grant, now: DateTime<Utc>) -> Caller {
        Caller {
            grant,
            now,
            acted_in: Arc::default(),
            operator: false,
        }
    }

    /// The local operator at `now`: every scope, every scene (default
    /// `main`), token name `cli`.
    pub fn operator(now: DateTime<Utc>) -> Caller {
        Caller {
            operator: true,
            ..Caller::new(Grant::operator(), now)
        }
    }

    /// Whether this is the local operator (not a token that happens to be named `cli`).
    pub(crate) fn is_operator(&self) -> bool {
        self.operator
    }

    /// The token's name (safe to log): recorded as the source of what it forgets.
    pub fn name(&self) -> &str {
        &self.grant.name
    }

    /// The request's instant, from the hub's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    /// The same caller asking about the instant `at` (an `as_of` read):
    /// every rule of the request sees `at` as now. Shares the audit's scene.
    pub(crate) fn at(&self, at: DateTime<Utc>) -> Caller {
        Caller {
            now: at,
            ..self.clone()
        }
    }

    /// The scene the last use case acted in, once it resolved one.
    pub fn acted_in(&self) -> Option<Scene> {
        self.acted_in.lock().expect("caller poisoned").clone()
    }

    fn record(&self, scene: &Scene) {
        *self.acted_in.lock().expect("caller poisoned") = Some(scene.clone());
    }

    /// Whether the token carries `scope`.
    pub(crate) fn has(&self, scope: &str) -> bool {
        self.grant.has(scope)
    }

    /// The token's scopes.
    pub(crate) fn scopes(&self) -> &std::collections::BTreeSet<String> {
        &self.grant.scopes
    }

    /// The token's scenes (the first is the default).
    pub(crate) fn scenes(&self) -> &[Scene] {
        &self.grant.scenes
    }

    /// The scenes the token may write, forget and edit in.
    pub(crate) fn write_scenes(&self) -> &[Scene] {
        &self.grant.write_scenes
    }

    /// Whether the token may act in `scene` (read it as its own).
    pub(crate) fn may_act_in(&self, scene: &Scene) -> bool {
        self.grant.any_scene || self.grant.scenes.contains(scene)
    }

    /// Whether the token may write in `scene`.
    pub(crate) fn may_write_in(&self, scene: &Scene) -> bool {
        self.grant.any_scene || self.grant.write_scenes.contains(scene)
    }

    /// Fails with `FORBIDDEN` unless the token carries `scope`.
    pub(crate) fn require(&self, scope: &str) -> Result<()> {
        if self.has(scope) {
            Ok(())
        } else {
            Err(Error::Forbidden(format!(
                "this token lacks the {scope:?} scope"
            )))
        }
    }

    /// The scene a request acts in: the one it names, else the token's first.
    pub(crate) fn scene(&self, requested: Option<&str>) -> Result<Scene> {
        let scene = match requested {
            None => self
                .grant
                .scenes
                .first()
                .cloned()
                .ok_or_else(|| Error::Forbidden("this token has no scene".into()))?,
            Some(s) => {
                let scene = Scene::parse(s)?;
                if !self.may_act_in(&scene) {
                    return Err(Error::Forbidden(format!(
                        "scene {scene} is not one of this token's scenes"
                    )));
                }
                scene
            }
        };
        self.record(&scene);
        Ok(scene)
    }

    /// The scene a write lands in: the one it names, which must be one of the
    /// token's write scenes ([`Grant::write_scenes`]), else the first of them.
    pub(crate) fn write_scene(&self, requested: Option<&str>) -> Result<Scene> {
        let g = &self.grant;
        let scene = match requested {
            None => g.write_scenes.first().cloned().ok_or_else(|| {
                Error::Forbidden(format!(
                    "token {:?} may not write in any scene; it reads {}",
                    g.name,
                    list(&g.scenes)
                ))
            })?,
            Some(s) => Scene::parse(s)?,
        };
        if !self.may_write_in(&scene) {
            return Err(Error::Forbidden(format!(
                "token {:?} may not write in scene {scene}; it writes in {}",
                g.name,
                list(&g.write_scenes)
            )));
        }
        self.record(&scene);
        Ok(scene)
    }

    /// Sensitivities the token may read.
    fn readable_privacy(&self) -> Vec<Privacy> {
        let mut out = vec![Privacy::Normal, Privacy::Personal];
        if self.has(scope::SENSITIVE_READ) {
            out.push(Privacy::Sensitive);
        }
        if self.has(scope::SECRET_READ) {
            out.push(Privacy::Secret);
        }
        out
    }

    /// The scenes a token without `*` may read: its own and `shared`.
    fn readable_scenes(&self) -> Vec<Scene> {
        let mut out = self.grant.scenes.clone();
        let shared = Scene::parse(SHARED_SCENE).expect("built-in scene names are valid");
        if !out.contains(&shared) {
            out.push(shared);
        }
        out
    }

    /// The scene a read acts in and the filter of everything it may see.
    pub(crate) fn read(&self, v: Visibility<'_>) -> Result<(Scene, Filter)> {
        let scene = self.scene(v.scene)?;
        let scenes = v
            .scenes
            .map(|l| {
                l.iter()
                    .map(|s| Scene::parse(s))
                    .collect::<Result<Vec<_>>>()
            })
            .transpose()?;
        Ok((scene, self.read_filter(scenes, v.from_owner)?))
    }

    /// The filter of a read of `scenes` (each must be the token's, unless it
    /// has `*`; `None`: every scene it may read).
    pub(crate) fn read_filter(
        &self,
        scenes: Option<Vec<Scene>>,
        from_owner: bool,
    ) -> Result<Filter> {
        self.require(scope::READ)?;
        let all = self.has(scope::ALL);
        let readable = self.readable_scenes();
        let scenes = match scenes {
            Some(list) => {
                if list.is_empty() {
                    return Err(Error::invalid("scenes must not be empty when given"));
                }
                if !all && let Some(bad) = list.iter().find(|s| !readable.contains(s)) {
                    return Err(Error::Forbidden(format!(
                        "scene {bad} is not one of this token's scenes"
                    )));
                }
                list
            }
            None if all => Vec::new(),
            None => readable,
        };
        let mut any_of = vec![Scope {
            scenes,
            privacy: self.readable_privacy(),
            unexpired_at: Some(self.now),
            ..Scope::default()
        }];
        if from_owner {
            if !all {
                self.require(scope::FROM_OWNER)?;
            }
            any_of.push(owner_scope(self.now));
        }
        Ok(Filter { any_of })
    }

    /// Checks a write of `privacy` (into a scene already resolved).
    pub(crate) fn check_write(&self, privacy: Privacy) -> Result<()> {
        self.require(scope::WRITE)?;
        if privacy == Privacy::Secret {
            self.require(scope::SECRET_WRITE)?;
        }
        if privacy == Privacy::Sensitive && !self.has(scope::SENSITIVE_READ) {
            return Err(Error::Forbidden(
                "writing sensitive memories needs the \"sensitive:read\" scope".into(),
            ));
        }
        Ok(())
    }

    /// What the token may forget, supersede, restore or edit: what it may
    /// write, in its write scenes. `*` widens what a token reads, never where
    /// it writes: a `*` token for `main` forgets nothing in a group (only the
    /// local operator acts in every scene). Handed to the lookup of the
    /// memory, so a memory outside it is `NOT_FOUND` whether or not it exists.
    pub(crate) fn writable(&self) -> Result<Filter> {
        self.require(scope::WRITE)?;
        let mut privacy = vec![Privacy::Normal, Privacy::Personal];
        if self.has(scope::SENSITIVE_READ) {
            privacy.push(Privacy::Sensitive);
        }
        if self.has(scope::SECRET_WRITE) {
            privacy.push(Privacy::Secret);
        }
        let scenes = if self.grant.any_scene {
            Vec::new()
        } else if self.grant.write_scenes.is_empty() {
            return Err(Error::Forbidden(format!(
                "token {:?} may not write in any scene",
                self.grant.name
            )));
        } else {
            self.grant.write_scenes.clone()
        };
        Ok(Filter::scope(Scope {
            scenes,
            privacy,
            ..Scope::default()
        }))
    }

    /// The filter of the archive of expired memories: the token's read
    /// filter (its scenes and privacy scopes) without the expiry condition.
    /// `restore` also rewrites the memory, so it keeps only what the token
    /// may write too: its write scenes and write privacy.
    pub(crate) fn archive_filter(&self, restore: bool) -> Result<Filter> {
        let filter = self.read_filter(None, false)?;
        let writable = if restore {
            Some(self.writable()?.any_of.remove(0))
        } else {
            None
        };
        let mut any_of = Vec::new();
        for mut scope in filter.any_of {
            scope.unexpired_at = None;
            if let Some(w) = &writable {
                scope.privacy.retain(|p| w.privacy.contains(p));
                if !w.scenes.is_empty() {
                    let scenes: Vec<Scene> = if scope.scenes.is_empty() {
                        w.scenes.clone()
                    } else {
                        scope
                            .scenes
                            .iter()
                            .filter(|s| w.scenes.contains(s))
                            .cloned()
                            .collect()
                    };
                    // No scene left admits nothing (an empty list would mean every scene).
                    if scenes.is_empty() {
                        continue;
                    }
                    scope.scenes = scenes;
                }
            }
            any_of.push(scope);
        }
        Ok(Filter { any_of })
    }

    /// The filter of a disclosure: one group's chat and notes, normal or
    /// personal, unexpired.
    pub(crate) fn disclose_filter(&self, group: &Scene) -> Result<Filter> {
        self.require(scope::DISCLOSE)?;
        if !group.as_str().starts_with("qq:group:") {
            return Err(Error::invalid(format!(
                "group must be a qq:group:<id> scene; got {group}"
            )));
        }
        Ok(Filter::scope(Scope {
            scenes: vec![group.clone()],
            privacy: vec![Privacy::Normal, Privacy::Personal],
            kinds: vec!["chat".into(), "note".into()],
            unexpired_at: Some(self.now),
            ..Scope::default()
        }))
    }
}

fn list(scenes: &[Scene]) -> String {
    if scenes.is_empty() {
        return "no scene".into();
    }
    scenes
        .iter()
        .map(Scene::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The owner's own memories in the owner's scenes: never sensitive, never secret.
pub(crate) fn owner_scope(now: DateTime<Utc>) -> Scope {
    Scope {
        scenes: OWNER_SCENES
            .iter()
            .map(|s| Scene::parse(s).expect("built-in scene names are valid"))
            .collect(),
        privacy: vec![Privacy::Normal, Privacy::Personal],
        subjects: vec![Subject::Owner],
        unexpired_at: Some(now),
        ..Scope::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::preset;

    fn caller(p: &str) -> Caller {
        let (scopes, scenes) = preset(p).unwrap();
        let grant = Grant::from_record(&crate::auth::TokenRecord {
            name: p.into(),
            hash: String::new(),
            scopes,
            scenes,
            preset: Some(p.into()),
            created_at: Utc::now(),
            revoked_at: None,
        });
        Caller::new(grant, Utc::now())
    }

    #[test]
    fn the_pet_writes_only_in_pet() {
        let pet = caller("pet");
        assert_eq!(pet.write_scene(None).unwrap().as_str(), "pet");
        let err = pet.write_scene(Some("main")).unwrap_err();
        assert_eq!(err.code().as_str(), "FORBIDDEN");
        assert_eq!(
            pet.writable().unwrap().any_of[0].scenes,
            [Scene::parse("pet").unwrap()]
        );
        // It still reads main.
        assert_eq!(pet.scene(None).unwrap().as_str(), "main");
        assert_eq!(pet.acted_in().unwrap().as_str(), "main");
        let g = caller("qq-group-7");
        assert_eq!(g.write_scene(None).unwrap().as_str(), "qq:group:7");
    }

    #[test]
    fn scenes_cannot_be_widened() {
        let g = caller("qq-group-1");
        assert_eq!(g.scene(None).unwrap().as_str(), "qq:group:1");
        let err = g.scene(Some("qq:owner")).unwrap_err();
        assert_eq!(err.code().as_str(), "FORBIDDEN");
        let main = Some(vec![Scene::parse("main").unwrap()]);
        assert_eq!(
            g.read_filter(main, false).unwrap_err().code().as_str(),
            "FORBIDDEN"
        );
    }

    #[test]
    fn privacy_follows_scopes() {
        let f = caller("qq-group-1").read_filter(None, false).unwrap();
        assert_eq!(f.any_of.len(), 1);
        assert_eq!(f.any_of[0].privacy, [Privacy::Normal, Privacy::Personal]);
        let f = caller("dsh-desktop").read_filter(None, false).unwrap();
        assert!(f.any_of[0].scenes.is_empty());
        assert!(f.any_of[0].privacy.contains(&Privacy::Secret));
        let f = caller("qq-group-1").read_filter(None, true).unwrap();
        assert_eq!(f.any_of[1].subjects, [Subject::Owner]);
        assert!(!f.any_of[1].privacy.contains(&Privacy::Sensitive));
        assert!(caller("pet").read_filter(None, true).is_err());
        assert!(caller("pet").check_write(Privacy::Secret).is_err());
        assert!(caller("qq-owner").check_write(Privacy::Secret).is_ok());
        assert!(caller("qq-disclose").read_filter(None, false).is_err());
    }

    #[test]
    fn archive_filter_keeps_privacy_scopes() {
        let main = Scene::parse("main").unwrap();
        let reader = Grant {
            name: "r".into(),
            scopes: ["*", "read", "write"].map(String::from).into(),
            scenes: vec![main.clone()],
            write_scenes: vec![main],
            any_scene: false,
        };
        let f = Caller::new(reader.clone(), Utc::now())
            .archive_filter(false)
            .unwrap();
        assert_eq!(f.any_of[0].privacy, [Privacy::Normal, Privacy::Personal]);
        assert_eq!(f.any_of[0].unexpired_at, None);
        let mut half = reader;
        half.scopes.insert(scope::SECRET_READ.into());
        let f = Caller::new(half, Utc::now()).archive_filter(true).unwrap();
        assert!(
            !f.any_of[0].privacy.contains(&Privacy::Secret),
            "restore needs secret:write too"
        );
        let f = caller("dsh-desktop").archive_filter(true).unwrap();
        assert!(f.any_of[0].privacy.contains(&Privacy::Secret));
    }

    #[test]
    fn star_widens_reading_never_writing() {
        let main = Scene::parse("main").unwrap();
        let star_main = Grant {
            name: "star-main".into(),
            scopes: ["*", "read", "write"].map(String::from).into(),
            scenes: vec![main.clone()],
            write_scenes: vec![main.clone()],
            any_scene: false,
        };
        let c = Caller::new(star_main, Utc::now());
        // It reads every scene ...
        assert!(
            c.read_filter(None, false).unwrap().any_of[0]
                .scenes
                .is_empty()
        );
        // ... but forgets, edits and restores only in its own.
        assert_eq!(
            c.writable().unwrap().any_of[0].scenes,
            std::slice::from_ref(&main)
        );
        let archive = c.archive_filter(true).unwrap();
        assert!(archive.any_of.iter().all(|s| s.scenes == [main.clone()]));
        assert!(c.archive_filter(false).unwrap().any_of[0].scenes.is_empty());
    }

    #[test]
    fn the_operator_acts_in_every_scene_with_every_scope() {
        let op = Caller::operator(Utc::now());
        assert_eq!(op.name(), "cli");
        assert_eq!(op.scene(None).unwrap().as_str(), "main");
        assert_eq!(op.scene(Some("qq:group:9")).unwrap().as_str(), "qq:group:9");
        assert_eq!(op.write_scene(Some("pet")).unwrap().as_str(), "pet");
        for s in scope::KNOWN {
            assert!(op.has(s), "{s}");
        }
        let f = op.read_filter(None, false).unwrap();
        assert!(f.any_of[0].scenes.is_empty());
        assert_eq!(f.any_of[0].privacy.len(), 4);
        assert!(op.writable().unwrap().any_of[0].scenes.is_empty());
    }
}
