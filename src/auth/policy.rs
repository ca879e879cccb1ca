//! Privacy policy: a token plus a request becomes the [`Filter`] of every query.
//!
//! The rules (DESIGN §4):
//!
//! - The request's scene must be one of the token's scenes, else `FORBIDDEN`;
//!   a caller can never widen its own rights.
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
//! Nothing here looks at results: the filter is handed to the index, which
//! makes it part of the tantivy query and of the SQL `WHERE`.

use chrono::{DateTime, Utc};

use super::{Grant, scope};
use crate::error::{Error, Result};
use crate::index::filter::{Filter, Scope};
use crate::model::{Privacy, Scene, Subject};

/// Scenes that belong to the owner: what `from_owner` opens up.
pub(crate) const OWNER_SCENES: &[&str] = &["main", "qq:owner"];

/// The audience every token may read.
pub(crate) const SHARED_SCENE: &str = "shared";

/// The scenes a token without `*` may read: its own and `shared`.
pub(crate) fn readable_scenes(grant: &Grant) -> Vec<Scene> {
    let mut out = grant.scenes.clone();
    let shared = Scene::parse(SHARED_SCENE).expect("built-in scene names are valid");
    if !out.contains(&shared) {
        out.push(shared);
    }
    out
}

/// The scene a request acts in: the one it names, else the token's first.
pub(crate) fn resolve_scene(grant: &Grant, requested: Option<&str>) -> Result<Scene> {
    match requested {
        None => grant
            .scenes
            .first()
            .cloned()
            .ok_or_else(|| Error::Forbidden("this token has no scene".into())),
        Some(s) => {
            let scene = Scene::parse(s)?;
            if grant.scenes.contains(&scene) {
                Ok(scene)
            } else {
                Err(Error::Forbidden(format!(
                    "scene {scene} is not one of this token's scenes"
                )))
            }
        }
    }
}

/// The scene a write lands in: the one it names, which must be one of the
/// token's write scenes ([`Grant::write_scenes`]), else the first of them.
pub(crate) fn resolve_write_scene(grant: &Grant, requested: Option<&str>) -> Result<Scene> {
    let scene = match requested {
        None => grant.write_scenes.first().cloned().ok_or_else(|| {
            Error::Forbidden(format!(
                "token {:?} may not write in any scene; it reads {}",
                grant.name,
                list(&grant.scenes)
            ))
        })?,
        Some(s) => Scene::parse(s)?,
    };
    if grant.write_scenes.contains(&scene) {
        Ok(scene)
    } else {
        Err(Error::Forbidden(format!(
            "token {:?} may not write in scene {scene}; it writes in {}",
            grant.name,
            list(&grant.write_scenes)
        )))
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

/// Fails with `FORBIDDEN` unless the token carries `scope`.
pub(crate) fn require(grant: &Grant, scope: &str) -> Result<()> {
    if grant.has(scope) {
        Ok(())
    } else {
        Err(Error::Forbidden(format!(
            "this token lacks the {scope:?} scope"
        )))
    }
}

/// Sensitivities a token may read.
pub(crate) fn readable_privacy(grant: &Grant) -> Vec<Privacy> {
    let mut out = vec![Privacy::Normal, Privacy::Personal];
    if grant.has(scope::SENSITIVE_READ) {
        out.push(Privacy::Sensitive);
    }
    if grant.has(scope::SECRET_READ) {
        out.push(Privacy::Secret);
    }
    out
}

/// Options of a read request that shape its visibility.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadOptions {
    /// Scenes to read (each must be the token's, unless it has `*`); `None`
    /// means every scene the token may read.
    pub(crate) scenes: Option<Vec<Scene>>,
    /// The owner is the one asking: open the owner's own memories for this request.
    pub(crate) from_owner: bool,
}

/// The filter of a read by `grant` at `now`.
pub(crate) fn read_filter(grant: &Grant, opts: &ReadOptions, now: DateTime<Utc>) -> Result<Filter> {
    require(grant, scope::READ)?;
    let all = grant.has(scope::ALL);
    let readable = readable_scenes(grant);
    let scenes = match &opts.scenes {
        Some(list) => {
            if list.is_empty() {
                return Err(Error::invalid("scenes must not be empty when given"));
            }
            if !all && let Some(bad) = list.iter().find(|s| !readable.contains(s)) {
                return Err(Error::Forbidden(format!(
                    "scene {bad} is not one of this token's scenes"
                )));
            }
            list.clone()
        }
        None if all => Vec::new(),
        None => readable,
    };
    let mut any_of = vec![Scope {
        scenes,
        privacy: readable_privacy(grant),
        unexpired_at: Some(now),
        ..Scope::default()
    }];
    if opts.from_owner {
        if !all {
            require(grant, scope::FROM_OWNER)?;
        }
        any_of.push(owner_scope(now));
    }
    Ok(Filter { any_of })
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

/// Checks a write of `privacy` into `scene` (already resolved against the token).
pub(crate) fn check_write(grant: &Grant, privacy: Privacy) -> Result<()> {
    require(grant, scope::WRITE)?;
    if privacy == Privacy::Secret {
        require(grant, scope::SECRET_WRITE)?;
    }
    if privacy == Privacy::Sensitive && !grant.has(scope::SENSITIVE_READ) {
        return Err(Error::Forbidden(
            "writing sensitive memories needs the \"sensitive:read\" scope".into(),
        ));
    }
    Ok(())
}

/// What a token may forget, supersede or edit: what it may write, in its
/// write scenes (every scene with `*`). Handed to the lookup of the memory,
/// so a memory outside it is `NOT_FOUND` whether or not it exists.
pub(crate) fn forget_filter(grant: &Grant) -> Result<Filter> {
    require(grant, scope::WRITE)?;
    let mut privacy = vec![Privacy::Normal, Privacy::Personal];
    if grant.has(scope::SENSITIVE_READ) {
        privacy.push(Privacy::Sensitive);
    }
    if grant.has(scope::SECRET_WRITE) {
        privacy.push(Privacy::Secret);
    }
    let scenes = if grant.has(scope::ALL) {
        Vec::new()
    } else if grant.write_scenes.is_empty() {
        return Err(Error::Forbidden(format!(
            "token {:?} may not write in any scene",
            grant.name
        )));
    } else {
        grant.write_scenes.clone()
    };
    Ok(Filter::scope(Scope {
        scenes,
        privacy,
        ..Scope::default()
    }))
}

/// The filter of the archive of expired memories: the token's read filter
/// (its scenes and privacy scopes) without the expiry condition. `restore`
/// also rewrites the memory, so it keeps only what the token may write too.
pub(crate) fn archive_filter(grant: &Grant, restore: bool, now: DateTime<Utc>) -> Result<Filter> {
    let mut filter = read_filter(grant, &ReadOptions::default(), now)?;
    let writable = if restore {
        forget_filter(grant)?.any_of.remove(0).privacy
    } else {
        Vec::new()
    };
    for scope in &mut filter.any_of {
        scope.unexpired_at = None;
        if restore {
            scope.privacy.retain(|p| writable.contains(p));
        }
    }
    Ok(filter)
}

/// The filter of a disclosure: one group's chat and notes, normal or personal, unexpired.
pub(crate) fn disclose_filter(grant: &Grant, group: &Scene, now: DateTime<Utc>) -> Result<Filter> {
    require(grant, scope::DISCLOSE)?;
    if !group.as_str().starts_with("qq:group:") {
        return Err(Error::invalid(format!(
            "group must be a qq:group:<id> scene; got {group}"
        )));
    }
    Ok(Filter::scope(Scope {
        scenes: vec![group.clone()],
        privacy: vec![Privacy::Normal, Privacy::Personal],
        kinds: vec!["chat".into(), "note".into()],
        unexpired_at: Some(now),
        ..Scope::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::preset;

    fn grant(p: &str) -> Grant {
        let (scopes, scenes) = preset(p).unwrap();
        Grant::from_record(&crate::auth::TokenRecord {
            name: p.into(),
            hash: String::new(),
            scopes,
            scenes,
            preset: Some(p.into()),
            created_at: Utc::now(),
            revoked_at: None,
        })
    }

    #[test]
    fn the_pet_writes_only_in_pet() {
        let pet = grant("pet");
        assert_eq!(resolve_write_scene(&pet, None).unwrap().as_str(), "pet");
        let err = resolve_write_scene(&pet, Some("main")).unwrap_err();
        assert_eq!(err.code().as_str(), "FORBIDDEN");
        assert_eq!(
            forget_filter(&pet).unwrap().any_of[0].scenes,
            [Scene::parse("pet").unwrap()]
        );
        // It still reads main.
        assert_eq!(resolve_scene(&pet, None).unwrap().as_str(), "main");
        let g = grant("qq-group-7");
        assert_eq!(
            resolve_write_scene(&g, None).unwrap().as_str(),
            "qq:group:7"
        );
    }

    #[test]
    fn scenes_cannot_be_widened() {
        let g = grant("qq-group-1");
        assert_eq!(resolve_scene(&g, None).unwrap().as_str(), "qq:group:1");
        let err = resolve_scene(&g, Some("qq:owner")).unwrap_err();
        assert_eq!(err.code().as_str(), "FORBIDDEN");
        let opts = ReadOptions {
            scenes: Some(vec![Scene::parse("main").unwrap()]),
            ..Default::default()
        };
        assert_eq!(
            read_filter(&g, &opts, Utc::now())
                .unwrap_err()
                .code()
                .as_str(),
            "FORBIDDEN"
        );
    }

    #[test]
    fn privacy_follows_scopes() {
        let now = Utc::now();
        let f = read_filter(&grant("qq-group-1"), &ReadOptions::default(), now).unwrap();
        assert_eq!(f.any_of.len(), 1);
        assert_eq!(f.any_of[0].privacy, [Privacy::Normal, Privacy::Personal]);
        let f = read_filter(&grant("dsh-desktop"), &ReadOptions::default(), now).unwrap();
        assert!(f.any_of[0].scenes.is_empty());
        assert!(f.any_of[0].privacy.contains(&Privacy::Secret));
        let owner = ReadOptions {
            from_owner: true,
            ..Default::default()
        };
        let f = read_filter(&grant("qq-group-1"), &owner, now).unwrap();
        assert_eq!(f.any_of[1].subjects, [Subject::Owner]);
        assert!(!f.any_of[1].privacy.contains(&Privacy::Sensitive));
        assert!(read_filter(&grant("pet"), &owner, now).is_err());
        assert!(check_write(&grant("pet"), Privacy::Secret).is_err());
        assert!(check_write(&grant("qq-owner"), Privacy::Secret).is_ok());
        assert!(read_filter(&grant("qq-disclose"), &ReadOptions::default(), now).is_err());
    }

    #[test]
    fn archive_filter_keeps_privacy_scopes() {
        let now = Utc::now();
        let reader = Grant {
            name: "r".into(),
            scopes: ["*", "read", "write"].map(String::from).into(),
            scenes: vec![Scene::parse("main").unwrap()],
            write_scenes: vec![Scene::parse("main").unwrap()],
        };
        let f = archive_filter(&reader, false, now).unwrap();
        assert_eq!(f.any_of[0].privacy, [Privacy::Normal, Privacy::Personal]);
        assert_eq!(f.any_of[0].unexpired_at, None);
        let mut half = reader.clone();
        half.scopes.insert(scope::SECRET_READ.into());
        let f = archive_filter(&half, true, now).unwrap();
        assert!(
            !f.any_of[0].privacy.contains(&Privacy::Secret),
            "restore needs secret:write too"
        );
        let f = archive_filter(&grant("dsh-desktop"), true, now).unwrap();
        assert!(f.any_of[0].privacy.contains(&Privacy::Secret));
    }
}
