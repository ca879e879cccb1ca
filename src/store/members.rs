//! Group membership: who is known to be in which QQ group.
//!
//! `/v1/disclose` tells a group's recent chat only to a known member, so the
//! table lives beside the other source files in `memories/groups/members.json`
//! (it survives a reindex and is part of backups). Members are learned from
//! ingested group messages (the sender) and from explicit add/remove calls.
//! The file is replaced atomically; an unreadable file makes every membership
//! check fail (fail closed) instead of falling back to an empty table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::StoreError;
use crate::error::{Error, IoContext, Result};
use crate::model::Scene;

/// One known member of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Member {
    /// Display name when last seen, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    /// When membership was first recorded.
    pub(crate) since: DateTime<Utc>,
    /// How it was learned: `ingest` or `explicit`.
    pub(crate) source: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberFile {
    version: u32,
    groups: BTreeMap<String, BTreeMap<String, Member>>,
}

/// Serialises read-modify-write cycles of the file within this process (the
/// writer lock keeps other processes out).
static WRITE: Mutex<()> = Mutex::new(());

/// `memories/groups/members.json` under a `memories/` directory.
pub(crate) fn path(memories: &Path) -> PathBuf {
    memories.join("groups").join("members.json")
}

/// A link at the table or its directory: never read or written through.
fn refuse_link(path: &Path) -> Result<()> {
    let linked = [Some(path), path.parent()]
        .into_iter()
        .flatten()
        .find(|p| super::links::is_link(p));
    match linked {
        Some(link) => Err(StoreError::Damaged {
            path: link.to_path_buf(),
            problem: format!(
                "{}; the membership table is not read or written through it",
                super::links::NOT_FOLLOWED
            ),
        }
        .into()),
        None => Ok(()),
    }
}

fn load(path: &Path) -> Result<MemberFile> {
    refuse_link(path)?;
    let read = super::links::open_read(path).and_then(|mut f| {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut f, &mut text).map(|_| text)
    });
    match read {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            StoreError::Damaged {
                path: path.to_path_buf(),
                problem: format!("the membership table is unreadable: {e}"),
            }
            .into()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(MemberFile {
            version: 1,
            groups: BTreeMap::new(),
        }),
        Err(e) => Err(e).ctx("cannot read membership table", path),
    }
}

/// Reads the table and returns how many groups it knows members of; an
/// error says why it is unreadable (health and doctor report it).
pub(crate) fn check(path: &Path) -> Result<usize> {
    Ok(load(path)?.groups.len())
}

/// Whether `user` is a known member of `group`. Errors (unreadable table) mean "no".
pub(crate) fn is_member(path: &Path, group: &Scene, user: &str) -> Result<bool> {
    Ok(load(path)?
        .groups
        .get(group.as_str())
        .is_some_and(|m| m.contains_key(user)))
}

/// The members of `group`, by user id.
#[cfg(test)]
pub(crate) fn members(path: &Path, group: &Scene) -> Result<BTreeMap<String, Member>> {
    Ok(load(path)?
        .groups
        .get(group.as_str())
        .cloned()
        .unwrap_or_default())
}

/// Adds and removes members; writes the file only if something changed.
/// Returns `(added, removed)` counts.
pub(crate) fn update(
    path: &Path,
    group: &Scene,
    add: &[(String, Option<String>)],
    remove: &[String],
    source: &str,
) -> Result<(usize, usize)> {
    let _guard = WRITE.lock().expect("membership lock poisoned");
    let mut file = load(path)?;
    let entry = file.groups.entry(group.as_str().to_string()).or_default();
    let (mut added, mut removed) = (0, 0);
    for (user, name) in add {
        validate_member(user, name.as_deref())?;
        // Known members are left as they are: rewriting the file for every
        // message would put a file replace on the ingest hot path.
        if !entry.contains_key(user) {
            entry.insert(
                user.clone(),
                Member {
                    name: name.clone(),
                    since: Utc::now(),
                    source: source.to_string(),
                },
            );
            added += 1;
        }
    }
    for user in remove {
        if entry.remove(user).is_some() {
            removed += 1;
        }
    }
    if added + removed > 0 {
        save(path, &mut file)?;
    }
    Ok((added, removed))
}

/// Replaces the member list of `group` (a daily reconciliation against the
/// provider's own list). Returns `(added, removed)` counts.
pub(crate) fn replace(
    path: &Path,
    group: &Scene,
    list: &[(String, Option<String>)],
    source: &str,
) -> Result<(usize, usize)> {
    for (user, name) in list {
        validate_member(user, name.as_deref())?;
    }
    let _guard = WRITE.lock().expect("membership lock poisoned");
    let mut file = load(path)?;
    let entry = file.groups.entry(group.as_str().to_string()).or_default();
    let before = entry.len();
    let mut kept = 0;
    entry.retain(|user, _| {
        let keep = list.iter().any(|(u, _)| u == user);
        kept += usize::from(keep);
        keep
    });
    let removed = before - kept;
    let mut added = 0;
    for (user, name) in list {
        if !entry.contains_key(user) {
            entry.insert(
                user.clone(),
                Member {
                    name: name.clone(),
                    since: Utc::now(),
                    source: source.to_string(),
                },
            );
            added += 1;
        }
    }
    if added + removed > 0 {
        save(path, &mut file)?;
    }
    Ok((added, removed))
}

fn save(path: &Path, file: &mut MemberFile) -> Result<()> {
    refuse_link(path)?;
    file.version = 1;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ctx("cannot create directory", dir)?;
    }
    let text = serde_json::to_string_pretty(file).expect("membership table serialises");
    crate::base::durable::write_atomic(path, text.as_bytes())
}

/// A member id is 1-64 bytes without control characters; neither it nor
/// the name holds a credential (the table is a source file, synced and
/// backed up like the journal).
fn validate_member(user: &str, name: Option<&str>) -> Result<()> {
    if user.is_empty() || user.len() > 64 || user.chars().any(char::is_control) {
        return Err(Error::invalid(
            "member ids must be 1-64 bytes without control characters",
        ));
    }
    use crate::content::FieldKind::{Id, Prose};
    let fields = [("member id", Id, user)]
        .into_iter()
        .chain(name.map(|n| ("member name", Prose, n)));
    if let Some(hit) = crate::content::scan(fields) {
        return Err(hit.refusal());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_remove_and_fail_closed() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        let g = Scene::parse("qq:group:1").unwrap();
        assert!(!is_member(&p, &g, "u1").unwrap());
        assert_eq!(
            update(&p, &g, &[("u1".into(), Some("A".into()))], &[], "ingest").unwrap(),
            (1, 0)
        );
        assert_eq!(
            update(&p, &g, &[("u1".into(), None)], &[], "ingest").unwrap(),
            (0, 0)
        );
        assert!(is_member(&p, &g, "u1").unwrap());
        assert!(!is_member(&p, &Scene::parse("qq:group:2").unwrap(), "u1").unwrap());
        update(&p, &g, &[], &["u1".into()], "explicit").unwrap();
        assert!(!is_member(&p, &g, "u1").unwrap());
        update(
            &p,
            &g,
            &[("u2".into(), None), ("u3".into(), None)],
            &[],
            "ingest",
        )
        .unwrap();
        assert_eq!(
            replace(
                &p,
                &g,
                &[("u3".into(), None), ("u4".into(), None)],
                "explicit"
            )
            .unwrap(),
            (1, 1)
        );
        let now: Vec<String> = members(&p, &g).unwrap().into_keys().collect();
        assert_eq!(now, ["u3", "u4"]);
        std::fs::write(&p, "{not json").unwrap();
        assert!(is_member(&p, &g, "u1").is_err());
    }
}
